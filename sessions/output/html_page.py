"""The HTML report's shell: its head, inline style and script (sessions/output/html.py fills the
body). The Content Security Policy lets nothing load: inline style and script only, so the page
reads the same offline and a client's text can never make it fetch anything."""

from string import Template

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

STYLE = """
:root { --pass: #1a7f37; --fail: #cf222e; --inc: #9a6700; --na: #57606a; --inv: #8250df;
        --line: #d0d7de; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, "DejaVu Sans", sans-serif; color: #1f2328; background: #fff;
       margin: 0 auto; max-width: 1240px; padding: 12px 16px 40px; }
h1 { font-size: 1.45em; margin: 0.2em 0 0.6em; overflow-wrap: anywhere; }
h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: 4px;
     margin-top: 1.6em; overflow-wrap: anywhere; }
h3 { font-size: 1.05em; margin-top: 1.2em; } h4 { font-size: 0.95em; margin: 1em 0 0.3em; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px;
       overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
.side { display: flex; flex-wrap: wrap; gap: 0 18px; align-items: flex-start; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
thead th { background: var(--soft); white-space: nowrap; }
tbody th { font-weight: normal; white-space: nowrap; }
td { overflow-wrap: break-word; }
.s-pass, .s-success, .s-detected { color: var(--pass); }
.s-fail, .s-failed, .s-missed { color: var(--fail); font-weight: 600; }
.s-inconclusive, .s-incomplete, .s-not-judged { color: var(--inc); }
.s-not-applicable { color: var(--na); } .s-invalid { color: var(--inv); font-weight: 600; }
.s-graded, .s-running { color: var(--na); }
.word { white-space: nowrap; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
dl.facts ul { margin: 0; padding-left: 1.2em; }
.warn { background: #fff8c5; }
.note { color: #57606a; font-size: 0.92em; font-weight: normal; }
.summary { font-size: 1.02em; }
.risk-high { color: var(--fail); } .risk-medium { color: var(--inc); }
.risk-low { color: var(--na); }
details.attempt { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0;
                  padding: 4px 10px; }
details.attempt > summary { cursor: pointer; padding: 3px 0; overflow-wrap: anywhere; }
details.attempt > summary .why { color: #57606a; font-size: 0.92em; }
details.attempt[open] > summary { border-bottom: 1px solid var(--line); margin-bottom: 6px; }
details.ev > summary { cursor: pointer; white-space: nowrap; }
details.ev ol { margin: 4px 0; padding-left: 1.4em; font-size: 0.9em; }
ul.claims ol { font-size: 0.9em; }
svg.timeline { display: block; width: 100%; min-width: 720px; height: auto;
               font: 12px "DejaVu Sans", sans-serif; }
svg.timeline text.row { fill: #1f2328; } svg.timeline text.tick { fill: #57606a; }
svg.timeline g.mark:hover, svg.timeline g.span:hover { opacity: 0.7; }
ul.legend { list-style: none; padding: 0; margin: 4px 0; display: flex; flex-wrap: wrap;
            gap: 4px 14px; font-size: 0.9em; }
svg.key { width: 16px; height: 14px; vertical-align: -2px; margin-right: 4px; }
button { font: inherit; padding: 2px 10px; }
@media (max-width: 600px) {
  body { padding: 8px; font-size: 13px; }
  dl.facts { grid-template-columns: 1fr; } dl.facts dd { margin-bottom: 4px; }
  /* an attempt's verdicts as one block each: name, verdict, expected; reason; evidence */
  table.stack thead { display: none; }
  table.stack, table.stack tbody, table.stack tr { display: block; width: 100%; }
  table.stack tr { border: 1px solid var(--line); margin: 6px 0; padding: 4px 6px; }
  table.stack th, table.stack td { display: inline; border: 0; padding: 0 8px 0 0; }
  table.stack td:nth-child(4), table.stack td:nth-child(6) { display: block; }
  table.stack td:nth-child(3)::before { content: "expected "; color: #57606a; }
  table.stack td:nth-child(5):not(:empty)::before { content: "failure class "; color: #57606a; }
}
"""

# Expand or collapse every attempt; opening a link's target (#a-3) opens its <details>.
SCRIPT = """
(function () {
  function openTarget() {
    var d = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (d && d.tagName === "DETAILS") { d.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.querySelectorAll("button[data-open]").forEach(function (b) {
    b.addEventListener("click", function () {
      var open = b.getAttribute("data-open") === "1";
      document.querySelectorAll("details.attempt").forEach(function (d) { d.open = open; });
    });
  });
})();
"""

PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="$csp">
<meta name="generator" content="evlab">
<title>$title</title>
<style>$style</style>
</head>
<body>
$body
<script>$script</script>
</body>
</html>
""")


def wrap(title: str, body: str) -> str:
    """The whole page around a body; title and body are HTML already (escaped)."""
    return PAGE.substitute(csp=CSP, title=title, style=STYLE, script=SCRIPT, body=body)
