"""The kernel's view of a client's outputs folder (the `files` records, probes' FolderWatch), and
the check any task with an output file may reuse: that the file arrived whole — written under
another name, then renamed or moved into place — never written in place under its final name.

A `files` record is one of FILE_EVENTS with `name` (its path in the outputs folder) and, for
a name that appears, `ino` (its inode as the record was read) and `symlink` (it is a symbolic
link); `renamed` names the `old` path too; `overflow` and `folder_gone` mean the view is
incomplete from there on. A target (a folder output of its own filesystem) also has, as each
invocation begins, a `present` record: the `names` it holds and their `inodes` (`truncated`
when there were more than the lab lists).
"""

from sessions.judging.judgement import PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import invocations, unjudgeable
from sessions.stream.events import ServerRecord
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

FILES = "files"   # the records' name in the evidence (inv.records[FILES])
FILE_EVENTS = ("created", "written", "closed_write", "renamed", "moved_in", "moved_out",
               "deleted", "overflow", "folder_gone", "present")
LOST = ("overflow", "folder_gone")
ARRIVALS = ("renamed", "moved_in", "created")


def file_records(inv: InvocationEvidence) -> list[ServerRecord] | Judgement:
    """An invocation's records of its outputs folder, or an inconclusive judgement when the
    kernel's view of it is incomplete."""
    seen = inv.records.get(FILES, [])
    lost = next((r for r in seen if r.event in LOST), None)
    if lost is not None:
        return unknown(f"invocation {inv.n}: the kernel's view of the outputs folder is "
                       f"incomplete ({lost.event})", (lost.seq,))
    return seen


def arrived_whole(ev: ScenarioEvidence, final: str) -> Judgement:
    """Pass when the output named `final` (its path in the outputs folder) was never created
    and written under that name in any invocation, only renamed or moved into place."""
    early = unjudgeable(ev)
    if early:
        return early
    arrivals = []
    for inv in invocations(ev):
        seen = file_records(inv)
        if isinstance(seen, Judgement):
            return seen
        written = written_in_place(seen, final)
        if written:
            first = written[0]
            how = ("made a symbolic link, which reads whatever it points at"
                   if first.fields.get("symlink") else
                   f"written in place through {first.fields.get('name')}, a hard link to it"
                   if first.fields.get("name") != final else
                   "written in place, under its final name")
            return failed(f"invocation {inv.n}: {final} was {how} (a crash would leave it "
                          "partial)", seqs(written))
        arrivals += [r for r in seen if r.fields.get("name") == final and r.event in ARRIVALS]
    if not arrivals:
        return Judgement(PASS, f"nothing was ever written under {final}")
    how = ", ".join(sorted({f"renamed from {r.fields.get('old')}" if r.event == "renamed"
                            else r.event.replace("_", " ") for r in arrivals}))
    return Judgement(PASS, f"{final} only arrived whole ({how}), never written in place",
                     tuple(seqs(arrivals)))


def written_in_place(seen: list[ServerRecord], final: str) -> list[ServerRecord]:
    """The records of one invocation's outputs folder that wrote the final name's content in
    place: bytes written under the name, or through another name of the file it names (a hard
    link: the same inode), or a file born under it by an open for writing and closed (empty, or
    written before the watch read it), or the name made a symbolic link (to a file still being
    written, say). A writer closed after its file was renamed into place
    (Node's stream of a response cut short) wrote nothing."""
    inode: dict[str, object] = {}   # each name's file, as last seen
    finals: set[object] = set()     # the files the final name has been
    born, out = False, []
    for r in seen:
        name = r.fields.get("name")
        if name == final and r.fields.get("symlink"):   # it reads whatever it points at
            out.append(r)
        if r.event in ARRIVALS and "ino" in r.fields:
            inode[str(name)] = r.fields["ino"]
            if name == final:
                finals.add(r.fields["ino"])
        if name == final and r.event == "created":
            born = True
        aliased = name != final and inode.get(str(name)) in finals
        if r.event == "written" and (name == final or aliased) or \
                r.event == "closed_write" and name == final and born:
            out.append(r)
    return out
