//! The names of the numbers polycc writes for programs (docs/metrics.md): each ends in its unit
//! or is one of a few named quantities, counts and identifiers, and none is a percentage. The
//! vocabulary is the `text` block of docs/metrics.md, read here and by
//! `experiments/tests/vocabulary.py`, so the page and both checkers cannot drift apart. Tests use
//! [`violations`] on what each JSON producer serializes.

use serde_json::Value;

/// docs/metrics.md, whose `text` block is the vocabulary.
pub const METRICS_MD: &str = include_str!("../../../docs/metrics.md");

/// The parsed vocabulary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vocabulary {
    /// Unit suffixes, e.g. `_ms`, `_bytes_per_sec`.
    pub suffixes: Vec<String>,
    /// Whole names allowed without a unit: named quantities, counts, identifiers.
    pub names: Vec<String>,
    /// Suffixes never allowed (percentages, `_mbit`).
    pub forbidden: Vec<String>,
}

impl Vocabulary {
    /// The vocabulary of docs/metrics.md.
    pub fn documented() -> Vocabulary {
        Vocabulary::parse(METRICS_MD)
    }

    /// Reads the lines `suffixes:`, `named:`, `counts:`, `identifiers:`, `forbidden:` of the
    /// first ```` ```text ```` block of `markdown`.
    pub fn parse(markdown: &str) -> Vocabulary {
        let block = markdown.split("```text\n").nth(1).and_then(|b| b.split("```").next()).unwrap_or("");
        let mut v = Vocabulary::default();
        for line in block.lines() {
            let Some((kind, words)) = line.split_once(':') else { continue };
            let words = words.split_whitespace().map(str::to_string);
            match kind.trim() {
                "suffixes" => v.suffixes.extend(words),
                "named" | "counts" | "identifiers" => v.names.extend(words),
                "forbidden" => v.forbidden.extend(words),
                _ => {}
            }
        }
        v
    }

    /// Why `key`, holding `value`, breaks the vocabulary; `None` when it does not.
    pub fn check(&self, key: &str, value: &Value) -> Option<String> {
        let numeric = |v: &Value| v.is_number();
        let is_quantity = numeric(value) || value.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(numeric));
        // Keys that are data (a flow count, a path, a histogram bucket), not field names.
        let field_like = key.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !is_quantity || !field_like {
            return None;
        }
        if let Some(f) = self.forbidden.iter().find(|f| key.ends_with(f.as_str())) {
            return Some(format!("`{key}` ends in `{f}`, which JSON never uses (docs/metrics.md)"));
        }
        if key.ends_with("_frac") {
            let out = |x: &Value| x.as_f64().is_some_and(|x| !(0.0..=1.0).contains(&x));
            if out(value) || value.as_array().is_some_and(|a| a.iter().any(out)) {
                return Some(format!("`{key}` = {value} is not a fraction in [0, 1] (a percentage?)"));
            }
        }
        if self.names.iter().any(|n| n == key) || self.suffixes.iter().any(|s| key.ends_with(s.as_str())) {
            return None;
        }
        Some(format!("`{key}` has no unit suffix and is not a named quantity, count or identifier (docs/metrics.md)"))
    }
}

/// Every key of `v`, at any depth, that breaks the documented vocabulary, as "path: why".
pub fn violations(v: &Value) -> Vec<String> {
    let vocab = Vocabulary::documented();
    let mut out = Vec::new();
    walk(&vocab, v, "", &mut out);
    out
}

/// The entries of `v` where it is a map of numbers keyed by data under a key that names their
/// unit or is a named quantity (`fusion_win_frac: {"bbr": 0.75}`): docs/metrics.md, rule 7.
fn per_key_map<'a>(vocab: &Vocabulary, key: &str, v: &'a Value) -> Option<&'a serde_json::Map<String, Value>> {
    let m = v.as_object()?;
    let unit = vocab.suffixes.iter().any(|s| key.ends_with(s.as_str())) || vocab.names.iter().any(|n| n == key);
    (unit && !m.is_empty() && m.values().all(Value::is_number)).then_some(m)
}

fn walk(vocab: &Vocabulary, v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{path}.{k}");
                if let Some(why) = vocab.check(k, x) {
                    out.push(format!("{here}: {why}"));
                }
                match per_key_map(vocab, k, x) {
                    // A map keyed by data (a member's name): each entry is a `k`.
                    Some(entries) => {
                        for (name, e) in entries {
                            if let Some(why) = vocab.check(k, e) {
                                out.push(format!("{here}.{name}: {why}"));
                            }
                        }
                    }
                    None => walk(vocab, x, &here, out),
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                walk(vocab, x, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_map_keyed_by_data_takes_its_keys_unit() {
        assert_eq!(violations(&json!({"fusion_win_frac": {"bbr": 0.75, "cubic": 0.25}})), Vec::<String>::new());
        let v = violations(&json!({"fusion_win_frac": {"bbr": 75.0}, "wins": {"bbr": 3}}));
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].starts_with(".fusion_win_frac.bbr:") && v[0].contains("not a fraction"), "{v:#?}");
        assert!(v[1].starts_with(".wins.bbr:") && v[1].contains("no unit suffix"), "{v:#?}");
    }

    #[test]
    fn the_documented_vocabulary_has_every_part() {
        let v = Vocabulary::documented();
        assert!(v.suffixes.iter().any(|s| s == "_mbps") && v.suffixes.iter().any(|s| s == "_frac"), "{v:?}");
        assert!(v.names.iter().any(|n| n == "jain_index") && v.names.iter().any(|n| n == "flow"), "{v:?}");
        assert!(v.forbidden.iter().any(|f| f == "_pct"), "{v:?}");
    }

    #[test]
    fn units_named_quantities_and_non_numbers_pass() {
        let ok = json!({
            "goodput_mbps": 9.5, "rtt_min_us": null, "loss_frac": 0.02, "jain_index": 0.9, "flow": 3,
            "policy": "vivace", "converged": true, "per_rtt": {"throughput_mbps": [1.0, 2.0]},
            "ratios": {"8": {"cpu_ratio": 1.2}}, "metadata": {"polycc.seed": "1"},
        });
        assert_eq!(violations(&ok), Vec::<String>::new());
    }

    #[test]
    fn a_bare_name_a_percentage_and_a_fraction_over_one_fail() {
        let bad = json!({"goodput": 1.0, "flows": [{"loss_pct": 2.0}], "x": {"loss_frac": 2.0}, "bw_mbit": 20});
        let v = violations(&bad);
        assert_eq!(v.len(), 4, "{v:#?}");
        assert!(v.iter().any(|e| e.starts_with(".goodput:") && e.contains("no unit")), "{v:#?}");
        assert!(v.iter().any(|e| e.starts_with(".flows[].loss_pct:") && e.contains("_pct")), "{v:#?}");
        assert!(v.iter().any(|e| e.starts_with(".x.loss_frac:") && e.contains("percentage")), "{v:#?}");
        assert!(v.iter().any(|e| e.starts_with(".bw_mbit:")), "{v:#?}");
    }
}
