//! A policy file's text in pieces of whole rules, so that a large file is parsed a piece at a
//! time (issue 16 A2).
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

use toml_parser::lexer::{Token, TokenKind};
use toml_parser::Source;

/// `text` cut before every `per_piece`th top-level `[[rule]]` header (at least one rule a piece).
pub(crate) fn rule_pieces(text: &str, per_piece: usize) -> Vec<&str> {
    let per_piece = per_piece.max(1);
    let mut cuts = vec![0];
    let mut headers = 0;
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
                    if headers > 0 && headers % per_piece == 0 {
                        cuts.push(t.span().start());
                    }
                    headers += 1;
                }
                continue;
            }
            TokenKind::LeftSquareBracket | TokenKind::LeftCurlyBracket => depth += 1,
            TokenKind::RightSquareBracket | TokenKind::RightCurlyBracket => depth = depth.saturating_sub(1),
            _ => {}
        }
        line_start = false;
    }
    cuts.push(text.len());
    cuts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
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
    use std::path::Path;

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
        use crate::policy_rules::{parse_file, to_toml};
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
        use crate::policy_rules::{parse_file, PolicyFileError};
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
}
