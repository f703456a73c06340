//! Tests of [`super`].

use super::*;
use serde_json::json;
use std::net::{Ipv4Addr, Ipv6Addr};

fn key(dst: [u8; 4], dst_port: u16, cong_alg: &str) -> FlowKey<'_> {
    FlowKey {
        src: Ipv4Addr::new(192, 168, 1, 10).into(),
        src_port: 40_000,
        dst: Ipv4Addr::from(dst).into(),
        dst_port,
        cong_alg,
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    Ipv4Addr::new(a, b, c, d).into()
}

fn v6(s: &str) -> IpAddr {
    s.parse::<Ipv6Addr>().unwrap().into()
}

fn parsed(rules: Value) -> Vec<ParsedRule> {
    rules.as_array().unwrap().iter().map(|r| parse_rule(r).unwrap()).collect()
}

fn set(rules: Value) -> RuleSet {
    RuleSet::from_parsed(parsed(rules)).unwrap()
}

fn chosen(s: &RuleSet, k: &FlowKey) -> Option<u32> {
    s.select(k).map(|r| r.id)
}

#[test]
fn first_matching_rule_wins_and_no_match_means_the_default() {
    let s = set(json!([
        {"dst_ports": "5201", "policy": "copa"},
        {"dst": "10.0.0.0/8", "policy": "bbr"},
        {"policy": "vegas", "cong_alg": "cubic"},
    ]));
    assert_eq!(chosen(&s, &key([10, 1, 2, 3], 5201, "ccp")), Some(1), "rule 1 comes first");
    assert_eq!(chosen(&s, &key([10, 1, 2, 3], 80, "ccp")), Some(2));
    assert_eq!(chosen(&s, &key([11, 0, 0, 1], 80, "cubic")), Some(3));
    assert_eq!(chosen(&s, &key([11, 0, 0, 1], 80, "ccp")), None, "the flags' default");
    assert_eq!(s.get(1).unwrap().policy.describe(), "copa");
}

#[test]
fn cidr_edges_slash_0_and_slash_32() {
    let all: IpCidr = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains(v4(255, 255, 255, 255)) && all.contains(v4(0, 0, 0, 0)));
    let one: IpCidr = "10.0.0.1/32".parse().unwrap();
    assert!(one.contains(v4(10, 0, 0, 1)));
    assert!(!one.contains(v4(10, 0, 0, 2)) && !one.contains(v4(10, 0, 0, 0)));
    assert_eq!("10.0.0.1".parse::<IpCidr>(), Ok(one), "a bare address is a /32");
    let net: IpCidr = "10.1.0.0/16".parse().unwrap();
    assert!(net.contains(v4(10, 1, 255, 255)) && !net.contains(v4(10, 2, 0, 0)));
    assert!(!net.contains(v4(10, 0, 255, 255)));
    assert!(matches!("10.0.0.1/33".parse::<IpCidr>(), Err(CidrError::Prefix { max: 32, .. })));
    assert!(matches!("10.0.0/8".parse::<IpCidr>(), Err(CidrError::Address(_))));
    assert!(matches!("10.0.0.0/x".parse::<IpCidr>(), Err(CidrError::Prefix { .. })));
    let e = "10.0.0.1/8".parse::<IpCidr>().unwrap_err();
    assert_eq!(e.to_string(), "`10.0.0.1/8` has host bits set; the subnet is 10.0.0.0/8");
    assert_eq!(
        "10.0.0.1/33".parse::<IpCidr>().unwrap_err().to_string(),
        "`10.0.0.1/33` has a prefix length outside 0..=32"
    );
    assert!(all.overlaps(&one) && net.overlaps(&"10.1.2.0/24".parse().unwrap()));
    assert!(!net.overlaps(&one));
}

#[test]
fn ipv6_subnets_parse_with_the_same_rules() {
    let net: IpCidr = "2001:db8::/32".parse().unwrap();
    assert_eq!((net.prefix_len(), net.max_prefix_len(), net.is_ipv4()), (32, 128, false));
    assert_eq!(net.to_string(), "2001:db8::/32");
    assert!(net.contains(v6("2001:db8::1")) && net.contains(v6("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
    assert!(!net.contains(v6("2001:db9::")) && !net.contains(v6("2001:db7:ffff::")));
    assert_eq!(net.broadcast(), v6("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"));
    // A bare address is a /128; the text is normalised (`0` groups compressed).
    let one: IpCidr = "2001:0db8:0:0::1".parse().unwrap();
    assert_eq!((one.prefix_len(), one.to_string().as_str()), (128, "2001:db8::1/128"));
    assert_eq!("2001:db8::1/128".parse::<IpCidr>(), Ok(one));
    assert!(one.contains(v6("2001:db8::1")) && !one.contains(v6("2001:db8::2")));
    let all: IpCidr = " ::/0 ".parse().unwrap();
    assert!(all.contains(v6("::")) && all.contains(v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
    // Host bits are refused, naming the subnet meant.
    let e = "2001:db8::1/32".parse::<IpCidr>().unwrap_err();
    assert_eq!(e.to_string(), "`2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32");
    assert!(matches!(e, CidrError::HostBits { .. }));
    // The prefix bound is the family's: /33 is a v6 prefix, /129 is none.
    assert!("2001:db8::/33".parse::<IpCidr>().is_ok());
    let e = "2001:db8::/129".parse::<IpCidr>().unwrap_err();
    assert_eq!(e.to_string(), "`2001:db8::/129` has a prefix length outside 0..=128");
    for bad in ["2001:db8:::/32", "2001:db8::g/64", "[2001:db8::1]", "fe80::1%eth0", "2001:db8::/"] {
        assert!(bad.parse::<IpCidr>().is_err(), "{bad}");
    }
    let e = "2001:db8::g/64".parse::<IpCidr>().unwrap_err();
    assert!(matches!(e, CidrError::Address(_)) && e.to_string().contains("2001:db8::/32"), "{e}");
    // As a rule's field: the error names the field and what is wrong.
    let e = parse_rule(&json!({"dst": "2001:db8::1/32", "policy": "reno"})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "field `dst`: invalid CIDR: `2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32"
    );
}

#[test]
fn families_never_contain_or_overlap_each_other() {
    let all4: IpCidr = "0.0.0.0/0".parse().unwrap();
    let all6: IpCidr = "::/0".parse().unwrap();
    let mapped: IpCidr = "::ffff:10.0.0.0/104".parse().unwrap();
    let ten: IpCidr = "10.0.0.0/8".parse().unwrap();
    assert!(!all4.contains(v6("2001:db8::1")) && !all4.contains(v6("::ffff:10.0.0.1")));
    assert!(!all6.contains(v4(10, 0, 0, 1)) && all6.contains(v6("::ffff:10.0.0.1")));
    assert!(!ten.contains(v6("::ffff:10.0.0.1")), "a subnet takes addresses as written");
    assert!(!mapped.contains(v4(10, 0, 0, 1)));
    for (a, b) in [(all4, all6), (ten, mapped), (all4, mapped), (ten, all6)] {
        assert!(!a.overlaps(&b) && !b.overlaps(&a), "{a} {b}");
    }
    assert!(all6.overlaps(&mapped) && all4.overlaps(&ten));
    let rule = |v: Value| parse_rule(&v).unwrap().rule;
    let a = rule(json!({"dst": "0.0.0.0/0", "policy": "reno"}));
    let b = rule(json!({"dst": "::/0", "policy": "reno"}));
    let c = rule(json!({"src": "::/0", "policy": "reno"}));
    assert!(!a.overlaps(&b) && a.overlaps(&c) && b.overlaps(&c));
}

/// A dual-stack socket talking IPv4 reports `::ffff:a.b.c.d`: the flow is an IPv4 flow to
/// rules; a v6 rule over the mapped range never sees it.
#[test]
fn an_ipv4_mapped_flow_matches_ipv4_rules() {
    let s = set(json!([
        {"dst": "::ffff:10.0.0.0/104", "policy": "copa"},
        {"dst": "::/0", "src": "2001:db8::/32", "policy": "vegas"},
        {"dst": "10.0.0.0/8", "src": "192.168.1.0/24", "policy": "bbr"},
        {"dst": "::/0", "policy": "cubic"},
    ]));
    let mut k = key([10, 1, 2, 3], 80, "ccp");
    k.dst = v6("::ffff:10.1.2.3");
    k.src = v6("::ffff:192.168.1.10");
    assert_eq!(chosen(&s, &k), Some(3));
    assert_eq!(s.select_linear(&k).map(|r| r.id), Some(3));
    k.dst = v6("::ffff:11.0.0.1");
    assert_eq!(chosen(&s, &k), None, "an IPv4 flow: no v6 rule takes it");
    k.dst = v6("2001:db8::5");
    assert_eq!(chosen(&s, &k), Some(4), "v6 to v6 from a mapped source");
    k.src = v6("2001:db8::1");
    assert_eq!(chosen(&s, &k), Some(2));
    // Only ::ffff:0:0/96 is read as IPv4 (not the deprecated IPv4-compatible ::a.b.c.d).
    assert_eq!(flow_addr(v6("::ffff:1.2.3.4")), v4(1, 2, 3, 4));
    assert_eq!(flow_addr(v6("::1.2.3.4")), v6("::1.2.3.4"));
}

#[test]
fn socket_addresses_show_v6_in_brackets() {
    assert_eq!(socket_addr_string(v4(1, 2, 3, 4), 5), "1.2.3.4:5");
    assert_eq!(socket_addr_string(v6("2001:db8::1"), 5), "[2001:db8::1]:5");
    assert_eq!(socket_addr_string(v6("::ffff:1.2.3.4"), 443), "1.2.3.4:443");
    assert_eq!(socket_addr_string(v6("::1"), 0), "[::1]:0");
}

#[test]
fn port_ranges_are_inclusive_and_checked() {
    let r: PortRange = "5000-5999".parse().unwrap();
    assert!(r.contains(5000) && r.contains(5999) && !r.contains(4999) && !r.contains(6000));
    assert_eq!("0-65535".parse::<PortRange>(), Ok(PortRange { first: 0, last: 65_535 }));
    assert!("6000-5000".parse::<PortRange>().unwrap_err().contains("backwards"));
    assert!("5000-70000".parse::<PortRange>().unwrap_err().contains("70000"));
    assert!("http".parse::<PortRange>().is_err());
    let s = set(json!([{"src_ports": 40000, "dst_ports": "1-2", "policy": "reno"}]));
    assert_eq!(chosen(&s, &key([1, 1, 1, 1], 2, "ccp")), Some(1));
    assert_eq!(chosen(&s, &key([1, 1, 1, 1], 3, "ccp")), None);
    let e = parse_rule(&json!({"dst_ports": 70000, "policy": "reno"})).unwrap_err();
    assert_eq!((e.field.as_str(), matches!(e.kind, RuleErrorKind::BadPortRange(_))), ("dst_ports", true), "{e}");
}

#[test]
fn cong_alg_and_source_subnet_match() {
    let s = set(json!([{"cong_alg": "bbr", "src": "192.168.1.0/24", "policy": "bbr"}]));
    assert_eq!(chosen(&s, &key([8, 8, 8, 8], 443, "bbr")), Some(1));
    assert_eq!(chosen(&s, &key([8, 8, 8, 8], 443, "ccp")), None);
    let mut k = key([8, 8, 8, 8], 443, "bbr");
    k.src = v4(192, 168, 2, 1);
    assert_eq!(chosen(&s, &k), None);
}

#[test]
fn policies_take_names_algorithm_tables_and_fused_tables() {
    let s = set(json!([
        {"policy": {"alg": "cubic", "beta": 0.8}},
        {"policy": {"fused": {"pilot": {"alg": "bbr"}, "copilots": [{"alg": "cubic"}], "fusion": "max"}}},
    ]));
    assert_eq!(s.rules()[0].policy.describe(), "cubic");
    assert_eq!(s.rules()[1].policy.describe(), "fused(pilot=bbr, copilots=cubic, max on cwnd)");
}

#[test]
fn ids_are_kept_or_assigned_after_the_largest() {
    let s = set(json!([{"policy": "reno"}, {"id": 7, "policy": "cubic"}, {"policy": "bbr"}]));
    let ids: Vec<u32> = s.rules().iter().map(|r| r.id).collect();
    assert_eq!(ids, [8, 7, 9]);
    let mut s = s;
    let id = s.add(parse_rule(&json!({"policy": "copa"})).unwrap(), Some(0)).unwrap();
    assert_eq!((id, s.rules()[0].id), (10, 10), "inserted first");
    assert!(s.add(parse_rule(&json!({"id": 7, "policy": "copa"})).unwrap(), None).is_err());
    assert_eq!(s.remove(10).map(|r| r.id), Some(10));
    assert!(s.remove(10).is_none());
    let id = s.add(parse_rule(&json!({"policy": "copa"})).unwrap(), None).unwrap();
    assert_eq!(id, 11, "a removed rule's id is not reused");
}

/// Issue 16 A1: after a rule with id 4294967295 the next id saturated to the same value, the
/// duplicate was persisted, and the next start refused the file.
#[test]
fn ids_never_saturate_into_a_duplicate() {
    let mut s = set(json!([{"id": u32::MAX, "policy": "reno"}]));
    let e = s.add(parse_rule(&json!({"policy": "copa"})).unwrap(), None).unwrap_err();
    assert!(matches!(e.kind, RuleErrorKind::IdsExhausted), "{e}");
    assert!(e.to_string().contains("give the rule an id"), "{e}");
    assert_eq!(s.rules().len(), 1, "nothing added");
    // An explicit free id still works.
    assert_eq!(s.add(parse_rule(&json!({"id": 5, "policy": "copa"})).unwrap(), None), Ok(5));
    // A set whose unnumbered rule would follow u32::MAX is refused, naming the rule.
    let (i, e) =
        RuleSet::from_parsed(parsed(json!([{"id": u32::MAX, "policy": "reno"}, {"policy": "bbr"}]))).unwrap_err();
    assert!(i == 1 && e.to_string().contains("give the rule an id"), "{e}");
}
