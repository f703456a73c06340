//! The policy file (`--policy FILE`): reading, writing, and errors that name the file, the rule
//! and the field.
//!
//! The file is TOML, a list of `[[rule]]` tables (fields as in `policy_rules.rs`):
//!
//! ```toml
//! [[rule]]
//! id = 1                       # optional: assigned (max + 1) when left out
//! dst = "10.1.0.0/16"          # a CIDR, or one address (= /32; an IPv6 one = /128)
//! src = "2001:db8::/32"        # IPv4 or IPv6
//! dst_ports = "5000-5999"      # "A-B", "A", or a number
//! src_ports = 40000
//! cong_alg = "ccp"
//! policy = "copa"              # a name, an algorithm table, or a fused table:
//! # policy = { alg = "cubic", beta = 0.8 }
//! # policy = { fused = { pilot = { alg = "bbr" }, copilots = [{ alg = "cubic" }], fusion = "max" } }
//! ```
//!
//! Changes are persisted with [`write_atomically`],
//! editing the file rather than writing it anew ([`rewrite`]): comments and layout around the
//! rules that stay are kept. 100,000 rules: a change takes 0.7 s and 118 MiB at peak, 2.6x
//! writing the text anew (`cargo bench -p polycc-agent --bench policy_rules`, 2026-11-26).
//!
//! ## Pieces (issue 16 A2)
//!
//! The toml crate lexes and parses a whole document before handing anything over, holding
//! about 50 bytes per byte of text: 100,000 rules (5.3 MB) peaked at 255 MiB of heap. Cut
//! before a top-level `[[rule]]` header, each piece is a document of its own that means what
//! it meant in the file: everything up to the next header belongs to that rule (`[rule.x]`
//! and `[[rule.x.y]]` sub-tables included), and the first piece keeps whatever precedes the
//! first header. Headers are found with toml's own lexer, so a `[[rule]]` inside a string, a
//! comment or a multi-line array or inline table is not one. Not cutting is always safe: a
//! header the scan does not recognise (`[["rule"]]`) stays inside its piece. The caller parses
//! the whole text again when a piece does not parse, so errors still name the file's lines.

use crate::atomic_write::write_atomically;
use crate::policy_rules::{parse_rule, ParsedRule, Rule, RuleError, RuleSet};
use serde_json::{Map, Value};
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;
use toml_parser::lexer::{Token, TokenKind};
use toml_parser::Source;

/// A policy file that cannot be used.
#[derive(Debug, Error)]
pub enum PolicyFileError {
    #[error("policy file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("policy file {path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("policy file {path}: unknown top-level key `{key}` (the file holds [[rule]] tables only)")]
    UnknownKey { path: PathBuf, key: String },
    #[error("policy file {path}: rule {number} ([[rule]] number {number} in the file): {source}")]
    Rule {
        path: PathBuf,
        /// 1-based, in file order.
        number: usize,
        #[source]
        source: RuleError,
    },
}

impl PolicyFileError {
    /// The rule error inside, if the file parsed but a rule did not.
    pub fn rule_error(&self) -> Option<&RuleError> {
        match self {
            PolicyFileError::Rule { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Rules parsed from the policy file a piece at a time (see [`rule_pieces`]).
const RULES_PER_PIECE: usize = 1024;

/// Parse a policy file's text (`path` names it in errors).
///
/// The text is parsed `RULES_PER_PIECE` rules at a time, so that 100,000 rules need tens of
/// MB rather than hundreds. Errors come in file order; a piece that does not parse on its own
/// has the whole text parsed, so that syntax errors name the file's lines.
pub fn parse_file(path: &Path, text: &str) -> Result<RuleSet, PolicyFileError> {
    parse_file_in_pieces(path, text, RULES_PER_PIECE)
}

/// [`parse_file`] cutting the text every `per_piece` rules: the fuzzer (`agent/fuzz`) cuts at
/// every rule and checks that the pieces mean what the whole text means.
#[doc(hidden)]
pub fn parse_file_in_pieces(path: &Path, text: &str, per_piece: usize) -> Result<RuleSet, PolicyFileError> {
    let at = |i: usize| move |source| PolicyFileError::Rule { path: path.into(), number: i + 1, source };
    let mut parsed = Vec::new();
    let parse_rules = |rules: Vec<Value>, parsed: &mut Vec<ParsedRule>| -> Result<(), PolicyFileError> {
        for r in &rules {
            parsed.push(parse_rule(r).map_err(at(parsed.len()))?);
        }
        Ok(())
    };
    for piece in rule_pieces(text, per_piece) {
        match rule_tables(path, piece) {
            Ok(rules) => parse_rules(rules, &mut parsed)?,
            Err(e) if piece.len() == text.len() => return Err(e),
            Err(_) => {
                parsed.clear();
                parse_rules(rule_tables(path, text)?, &mut parsed)?;
                break;
            }
        }
    }
    RuleSet::from_parsed(parsed).map_err(|(i, e)| at(i)(e))
}

/// The `[[rule]]` tables of a TOML document.
fn rule_tables(path: &Path, text: &str) -> Result<Vec<Value>, PolicyFileError> {
    let doc: Value = toml::from_str(text)
        .map_err(|e| PolicyFileError::Syntax { path: path.into(), message: e.to_string().trim_end().to_string() })?;
    let Value::Object(mut top) = doc else {
        return Err(PolicyFileError::Syntax { path: path.into(), message: "not a table".into() });
    };
    if let Some(key) = top.keys().find(|k| *k != "rule") {
        return Err(PolicyFileError::UnknownKey { path: path.into(), key: key.clone() });
    }
    match top.remove("rule") {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(PolicyFileError::Syntax { path: path.into(), message: "`rule` must be [[rule]] tables".into() }),
    }
}

/// Load `path`; a file that does not exist is an empty rule set (created on the first change).
pub fn load(path: &Path) -> Result<RuleSet, PolicyFileError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_file(path, &text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(RuleSet::default()),
        Err(source) => Err(PolicyFileError::Io { path: path.into(), source }),
    }
}

/// The policy file's text for `set`.
///
/// Written `RULES_PER_PIECE` rules at a time, like [`parse_file`] reads it (one document of
/// 100,000 rules took 140 MiB to write); the pieces join into the text one document would be.
pub fn to_toml(set: &RuleSet) -> String {
    let document = |rules: &[Rule]| {
        let mut doc = Map::new();
        doc.insert("rule".into(), Value::Array(rules.iter().map(Rule::to_json).collect()));
        toml::to_string(&Value::Object(doc)).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
    };
    let body = match set.rules().len() {
        0 => document(&[]),
        _ => set.rules().chunks(RULES_PER_PIECE).map(document).collect::<Vec<_>>().join("\n"),
    };
    format!("# polycc-portus per-flow policy rules: the first matching rule wins; others run the default.\n# Written by polycc-portus; edits made while it runs are overwritten by its next change.\n\n{body}")
}

/// Persist `set` to `path` atomically, keeping what the file's author wrote around the rules
/// that stay (see [`rewrite`]).
pub fn save(path: &Path, set: &RuleSet) -> io::Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(old) => rewrite(path, &old, set),
        Err(e) if e.kind() == io::ErrorKind::NotFound => to_toml(set),
        Err(e) => return Err(e),
    };
    write_atomically(path, text.as_bytes())
}

/// The policy file's text for `set`, edited from `old` rather than written anew: the text
/// before the first rule, each unchanged rule's lines (comments, layout and all) with the
/// comment lines just above its header, and the text after the last rule stay as they were; a
/// changed rule keeps the comments above it and is written anew; a removed rule goes with the
/// comments above it; a new rule is written where it now stands. A kept rule that had no `id`
/// gets the one the agent gave it, so that reading the file again gives the same ids. Where
/// `old` does not parse (edited by hand while the agent ran), the whole file is written anew.
pub fn rewrite(path: &Path, old: &str, set: &RuleSet) -> String {
    let Some(mut kept) = old_rules(path, old) else { return to_toml(set) };
    let mut out = kept.preamble.to_string();
    // Whether the last thing written is a rule written anew (then a blank line follows it).
    let mut fresh = false;
    for rule in set.rules() {
        match kept.by_id.remove(&rule.id) {
            Some(old) => {
                if fresh {
                    blank_line(&mut out);
                }
                out.push_str(old.lead);
                fresh = old.rule != *rule;
                match fresh {
                    false => out.push_str(&with_id(old.body, old.explicit_id, rule.id)),
                    true => out.push_str(&rule_toml(&rule.to_json())),
                }
            }
            None => {
                blank_line(&mut out);
                out.push_str(&rule_toml(&rule.to_json()));
                fresh = true;
            }
        }
    }
    if fresh && !kept.tail.is_empty() {
        blank_line(&mut out);
    }
    out.push_str(kept.tail);
    out
}

/// One `[[rule]]` table in the file's form.
fn rule_toml(json: &Value) -> String {
    let mut doc = Map::new();
    doc.insert("rule".into(), Value::Array(vec![json.clone()]));
    toml::to_string(&Value::Object(doc)).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
}

/// End `out` with an empty line, unless it is empty or already does.
fn blank_line(out: &mut String) {
    if !(out.is_empty() || out.ends_with("\n\n")) {
        out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
    }
}

/// `body` with `id = N` on the line after its header, where the author left the id out.
fn with_id(body: &str, explicit_id: bool, id: u32) -> String {
    if explicit_id {
        return body.to_string();
    }
    let header_end = body.find('\n').map_or(body.len(), |i| i + 1);
    let newline = if header_end == body.len() && !body.ends_with('\n') { "\n" } else { "" };
    format!("{}{newline}id = {id}\n{}", &body[..header_end], &body[header_end..])
}

/// A rule as it stands in the old file.
struct OldRule<'a> {
    /// The comment and blank lines just above its header.
    lead: &'a str,
    /// From its header to the next rule's lead.
    body: &'a str,
    explicit_id: bool,
    /// The rule, its id as the agent gave it.
    rule: Rule,
}

struct OldFile<'a> {
    preamble: &'a str,
    by_id: std::collections::HashMap<u32, OldRule<'a>>,
    /// Comment and blank lines after the last rule.
    tail: &'a str,
}

/// The old file cut at its rules, each parsed alone; `None` where any piece does not parse.
fn old_rules<'a>(path: &Path, text: &'a str) -> Option<OldFile<'a>> {
    let starts = rule_header_starts(text);
    let Some(&first) = starts.first() else {
        return Some(OldFile { preamble: text, by_id: Default::default(), tail: "" });
    };
    // Each rule's lines up to the next header, less the comment lines that lead into it: all
    // of them between two rules, those right above the first rule's header in the preamble.
    let preamble_end = comment_run_start(&text[..first], 0, false);
    let mut spans = Vec::with_capacity(starts.len());
    let mut lead_start = preamble_end;
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let header_end = text[start..end].find('\n').map_or(end, |n| start + n + 1);
        let body_end = start + comment_run_start(&text[start..end], header_end - start, true);
        spans.push((lead_start, start, body_end));
        lead_start = body_end;
    }
    let tail = &text[lead_start..];
    // Parsed RULES_PER_PIECE rules at a time, as `parse_file` does, each table matched to its span.
    let mut parsed = Vec::with_capacity(spans.len());
    for chunk in spans.chunks(RULES_PER_PIECE) {
        let piece = &text[chunk[0].1..chunk[chunk.len() - 1].2];
        let tables = rule_tables(path, piece).ok()?;
        if tables.len() != chunk.len() {
            return None;
        }
        for t in &tables {
            parsed.push(parse_rule(t).ok()?);
        }
    }
    let explicit: Vec<bool> = parsed.iter().map(|p| p.id.is_some()).collect();
    let set = RuleSet::from_parsed(parsed).ok()?;
    let by_id = set
        .into_rules()
        .into_iter()
        .zip(spans)
        .zip(explicit)
        .map(|((rule, (lead, start, end)), explicit_id)| {
            let old = OldRule { lead: &text[lead..start], body: &text[start..end], explicit_id, rule };
            (old.rule.id, old)
        })
        .collect();
    Some(OldFile { preamble: &text[..preamble_end], by_id, tail })
}

/// Where the run of comment lines that ends `text` begins, blank lines among them too where
/// `blank_lines` (else the run stops at one), never before `floor`.
fn comment_run_start(text: &str, floor: usize, blank_lines: bool) -> usize {
    let mut start = text.len();
    while start > floor {
        let above = text[..start].strip_suffix('\n').unwrap_or(&text[..start]);
        let line_start = above.rfind('\n').map_or(0, |i| i + 1).max(floor);
        let line = text[line_start..start].trim();
        let comment = line.starts_with('#') || (blank_lines && line.is_empty());
        if !comment || line_start < floor {
            break;
        }
        start = line_start;
    }
    start
}

/// `text` cut before every `per_piece`th top-level `[[rule]]` header (at least one rule a piece).
fn rule_pieces(text: &str, per_piece: usize) -> Vec<&str> {
    let per_piece = per_piece.max(1);
    let mut cuts = vec![0];
    cuts.extend(rule_header_starts(text).into_iter().skip(per_piece).step_by(per_piece));
    cuts.push(text.len());
    cuts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

/// Where each top-level `[[rule]]` header begins, in file order.
fn rule_header_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    // Open value brackets and braces: a `[` at a line's start inside a value is no header.
    let mut depth = 0usize;
    let mut line_start = true;
    let mut tokens = Source::new(text).lex().filter(|t| t.kind() != TokenKind::Comment);
    while let Some(t) = tokens.next() {
        match t.kind() {
            TokenKind::Whitespace => continue,
            TokenKind::Newline => {
                line_start = true;
                continue;
            }
            TokenKind::LeftSquareBracket if line_start && depth == 0 => {
                // A table header: its line's tokens, whitespace and comments aside.
                let mut header = vec![t];
                header.extend(
                    tokens
                        .by_ref()
                        .take_while(|t| t.kind() != TokenKind::Newline)
                        .filter(|t| t.kind() != TokenKind::Whitespace),
                );
                if is_rule_header(text, &header) {
                    starts.push(t.span().start());
                }
                continue;
            }
            TokenKind::LeftSquareBracket | TokenKind::LeftCurlyBracket => depth += 1,
            TokenKind::RightSquareBracket | TokenKind::RightCurlyBracket => depth = depth.saturating_sub(1),
            _ => {}
        }
        line_start = false;
    }
    starts
}

/// `[[rule]]`, brackets doubled without a gap (`[ [rule]]` is not an array of tables: left
/// uncut, it fails to parse in its piece and the whole text is parsed instead).
fn is_rule_header(text: &str, header: &[Token]) -> bool {
    use TokenKind::{Atom, LeftSquareBracket as Open, RightSquareBracket as Close};
    let kinds: Vec<TokenKind> = header.iter().map(Token::kind).collect();
    let adjacent = |a: &Token, b: &Token| a.span().end() == b.span().start();
    kinds == [Open, Open, Atom, Close, Close]
        && &text[header[2].span().start()..header[2].span().end()] == "rule"
        && adjacent(&header[0], &header[1])
        && adjacent(&header[3], &header[4])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pieces_start_at_rule_headers_and_keep_every_byte() {
        let text = "# rules\n[[rule]]\npolicy = \"reno\"\n[[rule]] # two\n[rule.policy]\nalg = \"cubic\"\n\
                    [[rule.policy.copilots]]\nalg = \"bbr\"\n  [[ rule ]]\npolicy = \"copa\"\n";
        let pieces = rule_pieces(text, 1);
        assert_eq!(pieces.concat(), text);
        assert_eq!(pieces.len(), 3, "{pieces:#?}");
        assert!(pieces[1].starts_with("[[rule]] # two\n[rule.policy]") && pieces[1].ends_with("alg = \"bbr\"\n  "));
        assert!(pieces[2].starts_with("[[ rule ]]"));
        assert_eq!(rule_pieces(text, 2).len(), 2);
        assert_eq!(rule_pieces(text, 3), [text]);
    }

    #[test]
    fn headers_inside_strings_comments_and_values_are_not_cut() {
        let text = "[[rule]]\npolicy = \"reno\"\nnote = \"\"\"\n[[rule]]\n\"\"\"\n# [[rule]]\n\
                    x = [\n[[\"rule\"]]\n]\ny = {\n[[rule]]\n}\n[[\"rule\"]]\n[ [rule]]\n";
        assert_eq!(rule_pieces(text, 1), [text]);
    }

    /// 3,000 rules are three pieces; the fused policies' sub-tables stay with their rules.
    fn big_file() -> String {
        (0..3000)
            .map(|i| match i % 3 {
                0 => format!("[[rule]]\ndst = \"10.0.{}.{}\"\npolicy = \"reno\"\n", i / 256, i % 256),
                1 => format!("[[rule]]\ndst_ports = {i}\n[rule.policy.fused]\nfusion = \"max\"\n[rule.policy.fused.pilot]\nalg = \"bbr\"\n[[rule.policy.fused.copilots]]\nalg = \"cubic\"\n"),
                _ => format!("[[rule]] # {i}\npolicy = {{ alg = \"cubic\", beta = 0.8 }}\n"),
            })
            .collect()
    }

    #[test]
    fn a_file_parsed_in_pieces_is_the_file_parsed_whole() {
        let text = big_file();
        assert_eq!(rule_pieces(&text, 1024).len(), 3);
        let s = parse_file(Path::new("p.toml"), &text).unwrap();
        assert_eq!(s.rules().len(), 3000);
        assert_eq!(s.rules()[2500].policy.describe(), "fused(pilot=bbr, copilots=cubic, max on cwnd)");
        assert_eq!(s.rules()[2500].dst_ports.map(|p| p.first), Some(2500));
        // to_toml writes in pieces too: the text one document would be, and the same rules.
        let text = to_toml(&s);
        let whole =
            toml::to_string(&serde_json::json!({"rule": s.rules().iter().map(|r| r.to_json()).collect::<Vec<_>>()}));
        assert!(text.ends_with(&whole.unwrap()), "pieces joined differently");
        assert_eq!(parse_file(Path::new("p.toml"), &text).unwrap(), s);
    }

    #[test]
    fn errors_in_a_later_piece_name_the_file_line_and_the_rule_number() {
        let text = big_file();
        let lines = text.lines().count();
        let broken = format!("{text}[[rule]]\npolicy = \"reno\"\ndst = [\n");
        let e = parse_file(Path::new("p.toml"), &broken).unwrap_err();
        assert!(matches!(e, PolicyFileError::Syntax { .. }), "{e}");
        assert!(e.to_string().contains(&format!("line {}", lines + 3)), "{e}");
        let bad_rule = text.replacen("dst_ports = 2500\n", "dst_ports = 99999\n", 1);
        let e = parse_file(Path::new("p.toml"), &bad_rule).unwrap_err();
        assert!(matches!(e, PolicyFileError::Rule { number: 2501, .. }), "{e}");
    }

    #[test]
    fn file_errors_name_the_file_the_rule_and_the_field() {
        let cases = [
            (
                "[[rule]]\npolicy = \"reno\"\n[[rule]]\ndstt = \"10.0.0.0/8\"\npolicy = \"reno\"\n",
                2,
                "dstt",
                "unknown field",
            ),
            ("[[rule]]\ndst = \"10.0.0.0/33\"\npolicy = \"reno\"\n", 1, "dst", "invalid CIDR"),
            ("[[rule]]\nsrc = \"10.0.0.1/8\"\npolicy = \"reno\"\n", 1, "src", "host bits"),
            (
                "[[rule]]\npolicy = \"reno\"\n[[rule]]\ndst = \"2001:db8::1/32\"\npolicy = \"reno\"\n",
                2,
                "dst",
                "`2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32",
            ),
            ("[[rule]]\nsrc = \"2001:db8::/129\"\npolicy = \"reno\"\n", 1, "src", "outside 0..=128"),
            ("[[rule]]\ndst_ports = \"9-1\"\npolicy = \"reno\"\n", 1, "dst_ports", "backwards"),
            ("[[rule]]\npolicy = { alg = \"cubic\", beta = 1.5 }\n", 1, "policy", "beta = 1.5 is outside (0, 1)"),
            ("[[rule]]\npolicy = { alg = \"cubic\", betta = 0.5 }\n", 1, "policy", "betta"),
            ("[[rule]]\npolicy = \"bbr3\"\n", 1, "policy", "unknown algorithm"),
            ("[[rule]]\ndst = \"10.0.0.0/8\"\n", 1, "policy", "needs a policy"),
            (
                "[[rule]]\nid = 4\npolicy = \"reno\"\n[[rule]]\nid = 4\npolicy = \"reno\"\n",
                2,
                "id",
                "used by an earlier",
            ),
        ];
        for (text, number, field, needle) in cases {
            let e = parse_file(Path::new("/etc/polycc/policy.toml"), text).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(&e, PolicyFileError::Rule { number: n, .. } if *n == number), "{msg}");
            assert_eq!(e.rule_error().unwrap().field, field, "{msg}");
            assert!(msg.starts_with("policy file /etc/polycc/policy.toml: rule "), "{msg}");
            assert!(msg.contains(&format!("field `{field}`")) && msg.contains(needle), "{msg}");
        }
        let e = parse_file(Path::new("p.toml"), "[[rule]\n").unwrap_err();
        assert!(matches!(e, PolicyFileError::Syntax { .. }) && e.to_string().contains("line 1"), "{e}");
        let e = parse_file(Path::new("p.toml"), "default = \"reno\"\n").unwrap_err();
        assert!(matches!(e, PolicyFileError::UnknownKey { .. }), "{e}");
    }

    #[test]
    fn rules_round_trip_through_the_file_format() {
        let s = set(json!([
            {"id": 3, "dst": "10.0.0.0/8", "src": "1.2.3.4", "dst_ports": "5000-5999", "src_ports": 7,
             "cong_alg": "ccp", "policy": {"alg": "cubic", "beta": 0.8}},
            {"policy": {"fused": {"pilot": {"alg": "bbr"}, "copilots": [{"alg": "cubic"}, {"alg": "vivace"}],
             "fusion": {"target": {"bytes": 90000}}, "fuse_on": "rate"}}},
            {"policy": "copa"},
        ]));
        let text = to_toml(&s);
        assert_eq!(parse_file(Path::new("x"), &text).unwrap(), s, "{text}");
        assert!(text.contains("policy = \"copa\""), "{text}");
        assert!(text.contains("[[rule.policy.fused.copilots]]\nalg = \"cubic\"\n\n"), "defaults stay implicit: {text}");
    }

    #[test]
    fn ipv6_rules_round_trip_through_the_file_format() {
        let s = set(json!([
            {"id": 1, "dst": "2001:0db8:0000::/32", "src": "::1", "policy": "bbr"},
            {"id": 2, "dst": "10.0.0.0/8", "src": "fe80::/10", "dst_ports": 443, "policy": "copa"},
            {"id": 3, "dst": "::ffff:10.0.0.0/104", "policy": "reno"},
            {"id": 4, "dst": "::/0", "policy": "cubic"},
        ]));
        let text = to_toml(&s);
        for line in
            ["dst = \"2001:db8::/32\"", "src = \"::1/128\"", "src = \"fe80::/10\"", "dst = \"::ffff:10.0.0.0/104\""]
        {
            assert!(text.contains(line), "{line} in {text}");
        }
        let back = parse_file(Path::new("x"), &text).unwrap();
        assert_eq!(back, s, "{text}");
        assert_eq!(to_toml(&back), text);
        assert_eq!(back.rules()[0].dst.map(|c| c.prefix_len()), Some(32));
        assert_eq!(back.rules()[2].dst.map(|c| c.is_ipv4()), Some(false), "a mapped subnet stays IPv6");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        save(&path, &s).unwrap();
        assert_eq!(load(&path).unwrap(), s);
    }

    #[test]
    fn save_then_load_gives_the_same_rules_and_a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        assert_eq!(load(&path).unwrap(), RuleSet::default());
        let s = set(json!([{"dst_ports": "5201", "policy": "copa"}]));
        save(&path, &s).unwrap();
        assert_eq!(load(&path).unwrap(), s);
    }

    const COMMENTED: &str = "\
# Our CDN's policy: edge ports first.
# Owner: netops.

# Video: Copa keeps the queue short.
[[rule]]
dst_ports = \"5000-5999\"   # the video fleet
policy = \"copa\"

# Bulk transfers.
[[rule]]
id = 7
dst = \"10.0.0.0/8\"
policy = { alg = \"cubic\", beta = 0.8 }  # gentler backoff

# Everything else on port 443.
[[rule]]
dst_ports = 443
policy = \"bbr\"

# end of rules
";

    #[test]
    fn rewriting_keeps_the_comments_of_the_rules_that_stay() {
        let path = Path::new("p.toml");
        let mut s = parse_file(path, COMMENTED).unwrap();
        assert_eq!(s.rules().iter().map(|r| r.id).collect::<Vec<_>>(), [8, 7, 9]);
        // Unchanged: the text comes back as it was, with the ids the agent gave spelled out.
        let same = rewrite(path, COMMENTED, &s);
        assert_eq!(same.matches("id = ").count(), 3, "{same}");
        assert_eq!(same.replace("id = 8\n", "").replace("id = 9\n", ""), COMMENTED);
        assert_eq!(parse_file(path, &same).unwrap(), s);

        // Replace the bulk rule, remove the 443 one, add one on top.
        let replaced = parse_rule(&json!({"dst": "10.0.0.0/8", "policy": "vegas"})).unwrap();
        s.replace(7, replaced).unwrap();
        s.remove(9);
        let added = s.add(parse_rule(&json!({"dst_ports": 8080, "policy": "reno"})).unwrap(), Some(0)).unwrap();
        let text = rewrite(path, COMMENTED, &s);
        assert_eq!(parse_file(path, &text).unwrap().rules(), s.rules(), "{text}");
        for kept in ["# Our CDN's policy: edge ports first.\n# Owner: netops.\n\n", "# the video fleet", "# Video: Copa keeps the queue short.\n[[rule]]", "# Bulk transfers.\n[[rule]]", "# end of rules\n"] {
            assert!(text.contains(kept), "{kept:?} kept in:\n{text}");
        }
        for gone in ["gentler backoff", "Everything else on port 443", "dst_ports = 443"] {
            assert!(!text.contains(gone), "{gone:?} gone from:\n{text}");
        }
        let top = format!("# Our CDN's policy: edge ports first.\n# Owner: netops.\n\n[[rule]]\ndst_ports = \"8080\"\nid = {added}\npolicy = \"reno\"\n\n# Video");
        assert!(text.starts_with(&top), "{text}");
    }

    #[test]
    fn a_file_that_no_longer_parses_is_written_anew() {
        let path = Path::new("p.toml");
        let s = parse_file(path, COMMENTED).unwrap();
        let broken = format!("{COMMENTED}[[rule]]\npolicy = \"bbr3\"\n");
        assert_eq!(rewrite(path, &broken, &s), to_toml(&s));
        // No rules at all: the old text is kept and the rules follow it.
        let t = rewrite(path, "# nothing yet\n", &s);
        assert!(t.starts_with("# nothing yet\n\n[[rule]]\ndst_ports = \"5000-5999\"\nid = 8\n"), "{t}");
        assert_eq!(parse_file(path, &t).unwrap(), s);
    }

    #[test]
    fn save_edits_the_file_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, COMMENTED).unwrap();
        let mut s = load(&path).unwrap();
        s.remove(9);
        save(&path, &s).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# the video fleet") && text.contains("# gentler backoff"), "{text}");
        assert_eq!(load(&path).unwrap().rules(), s.rules());
    }

    fn set(rules: Value) -> RuleSet {
        parse_file(Path::new("t.toml"), &toml::to_string(&json!({ "rule": rules })).unwrap()).unwrap()
    }
}
