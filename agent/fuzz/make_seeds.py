#!/usr/bin/env python3
"""Write the raw targets' seed corpora (seeds/control_request, seeds/policy_file) from the
repository's own examples, so they can be remade when the examples change:

- control_request: every request line the agent's tests send (the `r#"{"cmd"...}"#` literals in
  agent/src/control.rs) and the ones the docs show, where they are JSON;
- policy_file: the policy files the guest end-to-end tests wrote (results/vm-e2e/*.toml), the
  TOML examples in docs/agent.md, and the example in policy_file.rs' module docs, each also
  with its commented-out alternatives uncommented one at a time.

The structured targets have no seeds: their input is bytes that `arbitrary` reads into rules
and requests, and the examples' shapes (inline policies, [rule.policy] sub-tables, fused
copilot arrays, CIDRs of both families, port ranges) are in their generators instead.

    python3 agent/fuzz/make_seeds.py      (from anywhere; rewrites only the files it names)
"""
import hashlib
import json
import re
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent.parent


def write(target: str, name: str, data: str) -> None:
    out = FUZZ / "seeds" / target
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data.encode()).hexdigest()[:10]
    (out / f"{name}-{digest}").write_text(data)


def request_lines() -> list[str]:
    """JSON request lines from the agent's tests and docs."""
    found = []
    control = (ROOT / "agent/src/control.rs").read_text()
    found += re.findall(r'r#"(\{"cmd".*?\})"#', control)
    found += [m.rstrip() for m in re.findall(r'^//! (\{"cmd".*?\})\s+->', control, re.M)]
    found += re.findall(r'`(\{"cmd".*?\})`', (ROOT / "docs/agent.md").read_text())
    lines = []
    for line in found:
        try:
            json.loads(line)
        except ValueError:
            continue  # a template (`{..}`, `SEQ`) rather than a request
        if line not in lines:
            lines.append(line)
    return lines


def toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, re.S)


def with_alternatives(block: str) -> list[str]:
    """The block, and the block with each commented-out `key = ...` line put in instead of the
    line with the same key (the docs show alternatives that way)."""
    out = [block]
    lines = block.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"#\s*(\w+)\s*=(.*)", line)
        if not m:
            continue
        key = m.group(1)
        alt = [l for l in lines if not re.match(rf"{key}\s*=", l)]
        alt[alt.index(line)] = f"{key} ={m.group(2)}"
        out.append("\n".join(alt) + "\n")
    return out


def policy_files() -> list[tuple[str, str]]:
    files = [(p.stem, p.read_text()) for p in sorted((ROOT / "results/vm-e2e").glob("*.toml"))]
    for block in toml_blocks((ROOT / "docs/agent.md").read_text()):
        if "[[rule]]" in block:
            files += [("docs-agent", b) for b in with_alternatives(block)]
    module_docs = "\n".join(
        l[4:] if l.startswith("//! ") else l[3:]
        for l in (ROOT / "agent/control/src/policy_file.rs").read_text().splitlines()
        if l.startswith("//!")
    )
    for block in toml_blocks(module_docs):
        files += [("policy-file-rs", b) for b in with_alternatives(block)]
    return files


def main() -> None:
    for line in request_lines():
        cmd = json.loads(line).get("cmd", "none") if line.startswith("{") else "none"
        write("control_request", str(cmd), line)
    for name, text in policy_files():
        write("policy_file", name, text)


if __name__ == "__main__":
    main()
