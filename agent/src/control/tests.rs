//! Tests of [`super`].

use super::socket::serve_client_within;
use super::*;
use proptest::prelude::*;
use serde_json::json;

fn shared() -> Shared {
    Shared::new(RuleSet::default(), None)
}

fn ask(s: &Shared, line: &str) -> Response {
    match parse_request(line.as_bytes()) {
        Ok(r) => s.handle(r, &crate::logging::discard()),
        Err(e) => Response { ok: false, error: Some(e), ..Default::default() },
    }
}

fn code(r: &Response) -> Option<ErrorCode> {
    r.error.as_ref().map(|e| e.code)
}

#[test]
fn add_list_show_remove() {
    let s = shared();
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst_ports":"5201","policy":"copa"}}"#);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.rules.as_ref().unwrap()[0].id, 1);
    assert!(r.warnings[0].contains("without --policy"), "{r:?}");
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"policy":"bbr"},"position":0}"#);
    assert_eq!(r.warnings.len(), 2, "overlaps rule 1, and not persisted: {r:?}");
    let list = ask(&s, r#"{"cmd":"policy_list"}"#).rules.unwrap();
    assert_eq!(list.iter().map(|v| (v.id, v.position)).collect::<Vec<_>>(), [(2, 0), (1, 1)]);
    assert_eq!(list[1].description, "dst_ports 5201 -> copa");
    assert_eq!(ask(&s, r#"{"cmd":"policy_show","id":1}"#).rules.unwrap()[0].rule["policy"], "copa");
    let r = ask(&s, r#"{"cmd":"policy_remove","id":2}"#);
    assert!(r.ok && r.rules.unwrap()[0].id == 2);
    assert_eq!(code(&ask(&s, r#"{"cmd":"policy_remove","id":2}"#)), Some(ErrorCode::NoSuchRule));
    assert_eq!(code(&ask(&s, r#"{"cmd":"policy_show","id":9}"#)), Some(ErrorCode::NoSuchRule));
    assert_eq!(s.rules().rules().len(), 1);
}

/// Issue 16 K8: v6 subnets through the socket, and v6 (and IPv4-mapped) flows choosing by them.
#[test]
fn ipv6_rules_are_added_listed_and_chosen_for_v6_flows() {
    let s = shared();
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"2001:db8::/32","dst_ports":"443","policy":"bbr"}}"#);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.rules.as_ref().unwrap()[0].rule["dst"], "2001:db8::/32");
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"src":"fe80::1","dst":"10.0.0.0/8","policy":"cubic"}}"#);
    assert_eq!(r.warnings.len(), 1, "no overlap with the v6 rule, only `not persisted`: {r:?}");
    assert!(ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/8","policy":"copa"}}"#).ok);
    let list = ask(&s, r#"{"cmd":"policy_list"}"#).rules.unwrap();
    assert_eq!(
        list.iter().map(|v| v.description.as_str()).collect::<Vec<_>>(),
        ["dst 2001:db8::/32 dst_ports 443 -> bbr", "dst 10.0.0.0/8 src fe80::1/128 -> cubic", "dst 10.0.0.0/8 -> copa"]
    );
    let key = |src: &str, dst: &str, dst_port| policy_rules::FlowKey {
        src: src.parse().unwrap(),
        src_port: 40_000,
        dst: dst.parse().unwrap(),
        dst_port,
        cong_alg: "ccp",
    };
    let id = |k| s.select(&k).map(|(id, _)| id);
    assert_eq!(id(key("2001:db8::2", "2001:db8::1", 443)), Some(1));
    assert_eq!(id(key("2001:db8::2", "2001:db8::1", 80)), None);
    assert_eq!(id(key("fe80::1", "10.1.1.1", 80)), Some(2));
    assert_eq!(id(key("::ffff:192.168.0.1", "::ffff:10.1.1.1", 80)), Some(3), "an IPv4-mapped flow is IPv4");
    for (rule, message) in [
        (
            r#"{"dst":"2001:db8::1/32","policy":"copa"}"#,
            "`2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32",
        ),
        (r#"{"src":"2001:db8::/129","policy":"copa"}"#, "`2001:db8::/129` has a prefix length outside 0..=128"),
        (r#"{"dst":"2001:db8::g/64","policy":"copa"}"#, "`2001:db8::g/64` is not an IP address"),
    ] {
        let r = ask(&s, &format!(r#"{{"cmd":"policy_add","rule":{rule}}}"#));
        assert_eq!(code(&r), Some(ErrorCode::InvalidCidr), "{r:?}");
        assert!(r.error.unwrap().message.contains(message), "{rule}");
    }
    assert_eq!(s.rules().rules().len(), 3);
}

#[test]
fn replace_keeps_the_id_and_the_place_and_refuses_another_id() {
    let s = shared();
    for p in ["reno", "cubic", "bbr"] {
        assert!(ask(&s, &format!(r#"{{"cmd":"policy_add","rule":{{"dst_ports":"{}","policy":"{p}"}}}}"#, p.len())).ok);
    }
    let r = ask(&s, r#"{"cmd":"policy_replace","id":2,"rule":{"dst_ports":"5201","policy":"vivace"}}"#);
    assert!(r.ok, "{r:?}");
    assert_eq!((r.rules.as_ref().unwrap()[0].id, r.rules.as_ref().unwrap()[0].position), (2, 1));
    let list = ask(&s, r#"{"cmd":"policy_list"}"#).rules.unwrap();
    assert_eq!(
        list.iter().map(|v| v.description.as_str()).collect::<Vec<_>>(),
        ["dst_ports 4 -> reno", "dst_ports 5201 -> vivace", "dst_ports 3 -> bbr"]
    );
    assert_eq!(
        code(&ask(&s, r#"{"cmd":"policy_replace","id":9,"rule":{"policy":"reno"}}"#)),
        Some(ErrorCode::NoSuchRule)
    );
    let r = ask(&s, r#"{"cmd":"policy_replace","id":2,"rule":{"id":3,"policy":"reno"}}"#);
    assert_eq!(code(&r), Some(ErrorCode::InvalidRule), "{r:?}");
    let r = ask(&s, r#"{"cmd":"policy_replace","id":2,"rule":{"dst":"1.2.3.4/40","policy":"reno"}}"#);
    assert_eq!(code(&r), Some(ErrorCode::InvalidCidr));
    assert_eq!(s.rules().get(2).unwrap().describe(), "dst_ports 5201 -> vivace", "a refused replace changes nothing");
}

#[test]
fn live_changes_go_through_the_loop_and_time_out_without_one() {
    let s = Arc::new(shared());
    // No loop: the request waits LIVE_CHANGE_TIMEOUT and fails with loop_busy.
    let t = Instant::now();
    let r = ask(&s, r#"{"cmd":"flow_set","flow":7,"policy":"copa"}"#);
    assert_eq!(code(&r), Some(ErrorCode::LoopBusy), "{r:?}");
    assert!(t.elapsed() >= LIVE_CHANGE_TIMEOUT);
    let _ = s.take_live(); // the stale request
                           // A loop that answers: flow 7 exists, others do not.
    let l = Arc::clone(&s);
    let done = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&done);
    let looper = std::thread::spawn(move || {
        while !d.load(Ordering::SeqCst) {
            for req in l.take_live() {
                let answer = match req.change {
                    LiveChange::SetFlow { flow: 7, policy, .. } => Ok(vec![MovedFlow {
                        flow: 7,
                        datapath: "()".into(),
                        from: "reno".into(),
                        to: policy.describe(),
                        rule: None,
                        cwnd_before_bytes: 100,
                        cwnd_after_bytes: 100,
                    }]),
                    LiveChange::SetFlow { flow, .. } => {
                        Err(ErrorBody { code: ErrorCode::NoSuchFlow, message: format!("no flow {flow}") })
                    }
                    LiveChange::ApplyRule { id } => {
                        assert_eq!(l.rule_policy(id).unwrap().describe(), "copa");
                        Ok(vec![])
                    }
                };
                req.reply.send(answer).unwrap();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let r = ask(&s, r#"{"cmd":"flow_set","flow":7,"policy":{"alg":"cubic","beta":0.8}}"#);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.moved.unwrap()[0].to, "cubic");
    assert_eq!(code(&ask(&s, r#"{"cmd":"flow_set","flow":8,"policy":"copa"}"#)), Some(ErrorCode::NoSuchFlow));
    let r = ask(&s, r#"{"cmd":"flow_set","flow":7,"policy":{"alg":"cubic","beta":7}}"#);
    assert_eq!(code(&r), Some(ErrorCode::InvalidPolicy), "checked before the loop sees it: {r:?}");
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"policy":"copa"},"apply_live":true}"#);
    assert!(r.ok && r.moved == Some(vec![]), "{r:?}");
    done.store(true, Ordering::SeqCst);
    looper.join().unwrap();
}

/// `records`, `next` and `missed` sit at the answer's top level; answers to other commands
/// carry none of them and read back without a stats part.
#[test]
fn a_stats_answer_is_flat_on_the_wire_and_absent_from_other_answers() {
    let s = shared();
    let json = serde_json::to_value(ask(&s, r#"{"cmd":"stats","since":0}"#)).unwrap();
    assert_eq!(
        (json["next"].as_u64(), json["missed"].as_u64(), json["records"].as_array().map(Vec::len)),
        (Some(0), Some(0), Some(0))
    );
    assert!(json.get("stats").is_none(), "{json}");
    let back: Response = serde_json::from_value(json).unwrap();
    assert_eq!(back.stats, Some(StatsAnswer::default()));
    let flows = serde_json::to_value(ask(&s, r#"{"cmd":"flows"}"#)).unwrap();
    assert!(flows.get("next").is_none() && flows.get("records").is_none(), "{flows}");
    assert_eq!(serde_json::from_value::<Response>(flows).unwrap().stats, None);
}

#[test]
fn stats_answers_records_after_the_cursor() {
    let s = shared();
    let rec = |seq| crate::stats::StatsWindow::default().take(&Default::default(), seq, 1e9, 1.0);
    s.push_stats(|seq| vec![rec(seq()), rec(seq())], 1e9);
    let r = ask(&s, r#"{"cmd":"stats"}"#);
    let a = r.stats.unwrap();
    assert_eq!((a.records.len(), a.next, a.missed), (2, 2, 0));
    let r = ask(&s, r#"{"cmd":"stats","since":1}"#);
    assert_eq!(r.stats.unwrap().records.iter().map(|x| x.seq).collect::<Vec<_>>(), [2]);
    assert_eq!(code(&ask(&s, r#"{"cmd":"stats","since":-1}"#)), Some(ErrorCode::MalformedRequest));
}

#[test]
fn bad_rules_and_requests_get_typed_errors_and_change_nothing() {
    let s = shared();
    for (line, want) in [
        (r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/33","policy":"copa"}}"#, ErrorCode::InvalidCidr),
        (r#"{"cmd":"policy_add","rule":{"dstt":"10.0.0.0/8","policy":"copa"}}"#, ErrorCode::UnknownField),
        (r#"{"cmd":"policy_add","rule":{"dst_ports":"9-1","policy":"copa"}}"#, ErrorCode::BadPortRange),
        (r#"{"cmd":"policy_add","rule":{"policy":{"alg":"cubic","beta":2}}}"#, ErrorCode::InvalidPolicy),
        (r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/8"}}"#, ErrorCode::InvalidRule),
        (r#"{"cmd":"policy_add"}"#, ErrorCode::MalformedRequest),
        (r#"{"cmd":"policy_remove","id":-1}"#, ErrorCode::MalformedRequest),
        (r#"{"cmd":"flows","extra":1}"#, ErrorCode::MalformedRequest),
        (r#"{"cmd":"reboot"}"#, ErrorCode::MalformedRequest),
        ("[1,2]", ErrorCode::MalformedRequest),
        ("\u{0}\u{ff}", ErrorCode::MalformedRequest),
    ] {
        let r = ask(&s, line);
        assert_eq!(code(&r), Some(want), "{line}: {r:?}");
    }
    let e = ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.1/8","policy":"copa"}}"#).error.unwrap();
    assert_eq!(e.message, "rule: field `dst`: invalid CIDR: `10.0.0.1/8` has host bits set; the subnet is 10.0.0.0/8");
    assert!(s.rules().rules().is_empty());
}

#[test]
fn changes_are_persisted_before_they_apply_and_a_failed_write_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("polycc-control-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("policy.toml");
    let s = Shared::new(RuleSet::default(), Some(file.clone()));
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst":"10.0.0.0/8","policy":"bbr"}}"#);
    assert_eq!(r.persisted.as_deref(), Some(file.as_path()));
    assert_eq!(policy_file::load(&file).unwrap(), s.rules());
    // A policy file whose directory vanished: the write fails and the rules stay.
    let s = Shared::new(s.rules(), Some(dir.join("gone").join("policy.toml")));
    let r = ask(&s, r#"{"cmd":"policy_remove","id":1}"#);
    assert_eq!(code(&r), Some(ErrorCode::PersistFailed), "{r:?}");
    assert_eq!(s.rules().rules().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flows_rates_are_over_the_publish_period() {
    let s = shared();
    let row = |reports| FlowRow {
        flow: 3,
        datapath: "()".into(),
        src: "a".into(),
        dst: "b".into(),
        cong_alg: "ccp".into(),
        rule: Some(1),
        policy: "copa".into(),
        pilot: "copa".into(),
        copilots: vec![],
        cwnd_bytes: 14_480,
        rate_bytes_per_sec: None,
        rtt_us: Some(40_000),
        throughput_bytes_per_sec: 0.0,
        reports_per_sec: 0.0,
        reports,
        handovers: 0,
    };
    let t0 = Instant::now();
    s.publish(vec![FlowSample { row: row(10), acked_bytes: 1_000 }], t0);
    s.publish(vec![FlowSample { row: row(30), acked_bytes: 2_001_000 }], t0 + Duration::from_millis(500));
    let flows = ask(&s, r#"{"cmd":"flows"}"#).flows.unwrap();
    assert_eq!(flows[0].reports_per_sec, 40.0);
    assert_eq!(flows[0].throughput_bytes_per_sec, 4_000_000.0);
}

/// Issue 16 A4: the timeout was per read, so a client sending a byte a second held its place
/// (one of 16) for as long as it liked.
#[test]
fn a_client_that_trickles_a_request_is_dropped_at_the_request_deadline() {
    let (server, mut client) = UnixStream::pair().unwrap();
    let trickler = std::thread::spawn(move || {
        for _ in 0..20 {
            if client.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let started = Instant::now();
    let r = serve_client_within(server, &shared(), &crate::logging::discard(), Duration::from_millis(500));
    let took = started.elapsed();
    assert_eq!(r.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
    assert!(took < Duration::from_millis(1500), "held for {took:?} by a trickling client");
    trickler.join().unwrap();
    // A client that sends whole requests in time is served across many deadlines.
    let (server, mut client) = UnixStream::pair().unwrap();
    let served = std::thread::spawn(move || {
        serve_client_within(server, &shared(), &crate::logging::discard(), Duration::from_millis(300))
    });
    let mut answers = BufReader::new(client.try_clone().unwrap()).lines();
    for _ in 0..4 {
        client.write_all(b"{\"cmd\":\"flows\"}\n").unwrap();
        assert!(answers.next().unwrap().unwrap().contains("\"ok\":true"));
        std::thread::sleep(Duration::from_millis(200));
    }
    drop((answers, client));
    assert!(served.join().unwrap().is_ok(), "a client that closes after its requests ends cleanly");
}

/// A silent client's deadline passes inside the blocking read, where the socket's own timeout
/// says WouldBlock: it is the same deadline, and reads as TimedOut (the trickling test above
/// failed so under load).
#[test]
fn a_silent_client_times_out_as_timed_out() {
    let (server, _client) = UnixStream::pair().unwrap();
    let started = Instant::now();
    let r = serve_client_within(server, &shared(), &crate::logging::discard(), Duration::from_millis(200));
    assert_eq!(r.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
    assert!(started.elapsed() >= Duration::from_millis(200));
}

/// Issue 16 A5: `--control-socket PATH` removed whatever file was at PATH.
#[test]
fn a_path_that_is_not_a_socket_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "keep me").unwrap();
    let err = ControlSocket::open(&path).err().expect("a regular file must not be replaced");
    assert!(matches!(err, ControlOpenError::NotASocket { .. }), "{err}");
    assert!(err.to_string().contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    // A stale socket (nobody accepts on it) is still replaced.
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    assert!(ControlSocket::open(&stale).is_ok());
}

#[test]
fn the_socket_serves_json_lines_and_survives_garbage_and_half_closed_clients() {
    let dir = std::env::temp_dir().join(format!("polycc-control-sock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("sub").join("control.sock");
    let sock = ControlSocket::open(&path).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777, 0o700);
    assert!(matches!(ControlSocket::open(&path), Err(ControlOpenError::InUse { .. })));
    let _t = sock.spawn(Arc::new(shared()), crate::logging::discard()).unwrap();
    // A client that sends half a line and closes its write side.
    let mut half = UnixStream::connect(&path).unwrap();
    half.write_all(b"{\"cmd\":\"pol").unwrap();
    half.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    BufReader::new(&half).read_line(&mut answer).unwrap();
    assert!(answer.contains("malformed_request"), "{answer}");
    // Several requests on one connection, garbage between them.
    let mut c = UnixStream::connect(&path).unwrap();
    c.write_all(b"\xff\xfe garbage\n{\"cmd\":\"policy_add\",\"rule\":{\"policy\":\"reno\"}}\n{\"cmd\":\"flows\"}\n")
        .unwrap();
    let mut lines = BufReader::new(&c).lines();
    let first: Response = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(code(&first), Some(ErrorCode::MalformedRequest));
    let second: Response = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(second.ok, "{second:?}");
    let r = client::request(&path, &Request::PolicyList {}).unwrap();
    assert_eq!(r.rules.unwrap().len(), 1);
    drop(sock);
    assert!(matches!(client::request(&path, &Request::Flows {}), Err(client::ClientError::NotRunning { .. })));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn requests_round_trip() {
    for r in [
        Request::PolicyList {},
        Request::PolicyShow { id: 3 },
        Request::PolicyAdd { rule: json!({"policy": "copa"}), position: Some(0), apply_live: false },
        Request::PolicyAdd { rule: json!({"policy": "copa"}), position: None, apply_live: true },
        Request::PolicyReplace { id: 3, rule: json!({"policy": "vivace"}), apply_live: true },
        Request::PolicyRemove { id: 3 },
        Request::Flows {},
        Request::Stats { since: None },
        Request::Stats { since: Some(9) },
        Request::FlowSet { flow: 7, datapath: None, policy: json!("copa") },
        Request::ModelLoad { path: PathBuf::from("/opt/mocc.onnx") },
    ] {
        assert_eq!(parse_request(&serde_json::to_vec(&r).unwrap()), Ok(r));
    }
}

#[test]
fn model_load_swaps_a_valid_model_and_refuses_bad_files_keeping_the_old_one() {
    use polycc_algorithms::mocc::{synthetic, MODEL_INPUT_LEN};
    let dir = std::env::temp_dir().join(format!("polycc-control-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = write("good.onnx", &synthetic::valid_model_bytes());
    let mut no_seed = synthetic::metadata();
    no_seed.retain(|(k, _)| k != "polycc.seed");
    let cases = [
        (write("corrupt.onnx", b"\x08\x07not a protobuf at all"), ErrorCode::ModelInvalid, "not a readable ONNX"),
        (
            write("shape.onnx", &synthetic::model_bytes(&[0.5; 30], 0.0, 2.0, &synthetic::metadata())),
            ErrorCode::ModelInvalid,
            "[N, 30]: expected [N, 33]",
        ),
        (
            write("meta.onnx", &synthetic::model_bytes(&[0.5; MODEL_INPUT_LEN], 0.0, 2.0, &no_seed)),
            ErrorCode::ModelInvalid,
            "polycc.seed",
        ),
        (dir.join("absent.onnx"), ErrorCode::ModelMissing, "no MOCC model at"),
        (dir.clone(), ErrorCode::ModelUnreadable, "cannot read"),
    ];
    let s = shared();
    assert!(s.mocc_model().get().is_none());
    let load = |p: &Path| s.handle(Request::ModelLoad { path: p.to_path_buf() }, &crate::logging::discard());
    let r = load(&good);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.model.as_ref().unwrap().metadata["polycc.format"], "mocc-1");
    let before = s.mocc_model().get().unwrap();
    for (path, code, text) in cases {
        let r = load(&path);
        let e = r.error.unwrap();
        assert_eq!(e.code, code, "{}: {}", path.display(), e.message);
        assert!(e.message.contains(text) && e.message.contains("previous model stays"), "{}", e.message);
        assert!(Arc::ptr_eq(&before, &s.mocc_model().get().unwrap()), "a refused model changes nothing");
    }
    // A flow's view of the slot follows a swap.
    let flow_slot = s.mocc_model().clone();
    assert!(load(&good).ok);
    assert!(!Arc::ptr_eq(&before, &flow_slot.get().unwrap()), "flows see the new model");
    std::fs::remove_dir_all(&dir).ok();
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic_the_parser(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
        let _ = parse_request(&bytes);
    }

    #[test]
    fn random_json_never_panics_the_handler(
        cmd in proptest::sample::select(vec!["policy_list", "policy_show", "policy_add", "policy_replace", "policy_remove", "flows", "stats", "x"]),
        key in proptest::sample::select(vec!["dst", "src", "dst_ports", "src_ports", "cong_alg", "policy", "id", "bogus"]),
        value in proptest::prop_oneof![
            proptest::num::i64::ANY.prop_map(|v| json!(v)),
            "[0-9./\\-a-z]{0,20}".prop_map(|v| json!(v)),
            proptest::num::f64::ANY.prop_map(|v| json!(v)),
            proptest::strategy::Just(json!({"alg": "cubic", "beta": -1})),
            proptest::strategy::Just(json!(null)),
        ],
        id in proptest::num::i64::ANY,
    ) {
        let s = shared();
        let mut rule = serde_json::Map::new();
        rule.insert(key.to_string(), value);
        rule.entry("policy").or_insert(json!("reno"));
        let line = json!({"cmd": cmd, "rule": rule, "id": id}).to_string();
        let _ = ask(&s, &line);
        let line = json!({"cmd": cmd, "rule": rule}).to_string();
        let _ = ask(&s, &line);
    }
}

/// The registry's toy algorithm (feature `toy`, on in tests) is a policy like any other, by name
/// and with its parameter, and refused outside its range: no code in the agent names it.
#[test]
fn a_registered_algorithm_is_accepted_by_the_socket_without_agent_code() {
    let s = shared();
    assert!(ask(&s, r#"{"cmd":"policy_add","rule":{"dst_ports":"5201","policy":"toy"}}"#).ok);
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst_ports":"5202","policy":{"alg":"toy","packets":30}}}"#);
    assert!(r.ok, "{r:?}");
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"policy":{"alg":"toy","packets":1}}}"#);
    assert_eq!(code(&r), Some(ErrorCode::InvalidPolicy));
    assert!(r.error.unwrap().message.contains("packets = 1 is outside [2, 10000]"));
    assert_eq!(s.rules().rules().len(), 2);
}

/// A rule's MOCC model file (`"model"` in its policy) is the one its flows run, not the agent's
/// default; a relative path is under the policy file's directory; a bad file refuses the rule.
#[test]
fn a_rules_mocc_model_is_loaded_and_given_to_its_flows() {
    use polycc_algorithms::mocc::synthetic;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("default.onnx"), synthetic::valid_model_bytes()).unwrap();
    std::fs::write(dir.path().join("rule.onnx"), synthetic::valid_model_bytes()).unwrap();
    let s = Shared::new(RuleSet::default(), Some(dir.path().join("policy.toml")));
    let log = crate::logging::discard();
    assert!(s.handle(Request::ModelLoad { path: dir.path().join("default.onnx") }, &log).ok);
    let default = s.mocc_model().get().unwrap();

    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst_ports":"5201","policy":{"alg":"mocc","model":"rule.onnx"}}}"#);
    assert!(r.ok, "{r:?}");
    let r = ask(&s, r#"{"cmd":"policy_add","rule":{"dst_ports":"5202","policy":"mocc"}}"#);
    assert!(r.ok, "{r:?}");
    let model_of = |rule: u32| {
        let mut p = s.rule_policy(rule).unwrap();
        s.attach_models(&mut p);
        let members = p.mocc_members_mut();
        members[0].slot.as_ref().and_then(ModelSlot::get).expect("a model attached")
    };
    let named = model_of(1);
    assert!(!Arc::ptr_eq(&named, &default), "rule 1 names its own model");
    assert!(Arc::ptr_eq(&model_of(2), &default), "rule 2 names none: the agent's");
    // `model load` swaps the default only.
    assert!(s.handle(Request::ModelLoad { path: dir.path().join("default.onnx") }, &log).ok);
    assert!(Arc::ptr_eq(&model_of(1), &named));

    for (rule, code, text) in [
        (r#"{"policy":{"alg":"mocc","model":"absent.onnx"}}"#, ErrorCode::ModelMissing, "no MOCC model at"),
        (r#"{"policy":{"alg":"mocc","model":"policy.toml"}}"#, ErrorCode::ModelInvalid, "policy.toml"),
    ] {
        let r = ask(&s, &format!(r#"{{"cmd":"policy_add","rule":{rule}}}"#));
        let e = r.error.expect("refused");
        assert_eq!(e.code, code, "{}", e.message);
        assert!(e.message.contains(text) && e.message.contains("nothing changed"), "{}", e.message);
        assert_eq!(s.rules().rules().len(), 2, "a refused rule is not added");
        let r = ask(&s, &format!(r#"{{"cmd":"policy_replace","id":1,"rule":{rule}}}"#));
        assert_eq!(r.error.map(|e| e.code), Some(code));
        assert!(Arc::ptr_eq(&model_of(1), &named), "rule 1 keeps its model");
    }
}

/// docs/metrics.md: every figure a client reads from the socket (`polycc flows --json`, a live
/// change's `moved`, a loaded model) ends in its unit.
#[test]
fn control_answers_names_carry_their_units() {
    let row = FlowRow {
        flow: 3,
        datapath: "()".into(),
        src: "a".into(),
        dst: "b".into(),
        cong_alg: "ccp".into(),
        rule: Some(1),
        policy: "fused(bbr+cubic,max cwnd)".into(),
        pilot: "bbr".into(),
        copilots: vec!["cubic".into()],
        cwnd_bytes: 14_480,
        rate_bytes_per_sec: Some(1_250_000),
        rtt_us: Some(40_000),
        throughput_bytes_per_sec: 1.2e6,
        reports_per_sec: 25.0,
        reports: 100,
        handovers: 1,
    };
    let moved = MovedFlow {
        flow: 3,
        datapath: "()".into(),
        from: "cubic".into(),
        to: "bbr".into(),
        rule: Some(1),
        cwnd_before_bytes: 14_480,
        cwnd_after_bytes: 28_960,
    };
    let model =
        ModelView { path: "/m.onnx".into(), size_bytes: 4096, metadata: [("polycc.seed".into(), "1".into())].into() };
    let answer = Response {
        ok: true,
        flows: Some(vec![row]),
        moved: Some(vec![moved]),
        model: Some(model),
        stats: Some(Default::default()),
        ..Default::default()
    };
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(polycc_control::vocabulary::violations(&json), Vec::<String>::new(), "{json}");
}
