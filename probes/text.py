"""Text a client controls (its process names, paths, argv, output) as evlab carries it: a str
that is always valid Unicode. Bytes that are not UTF-8 are kept as visible escapes (`\\xff`), so
nothing is lost, every output can encode it and a replay shows the same text. How each output
then shows it (escaped for the terminal, Markdown, XML) is sessions/output/escape.py's."""


def decoded(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def cleaned(text: str) -> str:
    """A str from an OS interface (os.walk, psutil: undecodable bytes as lone surrogates) or a
    JSON document (`"\\ud800"`), as `decoded` would carry it."""
    try:
        return decoded(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:   # a surrogate that stands for no byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
