//! CCP's wire protocol (libccp / portus 0.9): little-endian, 8-byte header
//! `{u16 type, u16 len (header included), u32 socket id}`.
//!
//! Datapath -> agent messages (CREATE, MEASURE, READY) are parsed here, defensively: on netlink
//! any local process may write to the agent's socket, and portus' own parser panics or reads
//! out of bounds on short messages. Agent -> datapath messages (INSTALL, UPDATE_FIELDS,
//! CHANGE_PROG) are built with portus' serializers.

use portus::lang::Reg;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use thiserror::Error;

pub const HEADER_BYTES: usize = 8;
pub const CREATE: u16 = 0;
pub const MEASURE: u16 = 1;
pub const INSTALL: u16 = 2;
pub const UPDATE_FIELDS: u16 = 3;
pub const CHANGE_PROG: u16 = 4;
pub const READY: u16 = 5;
/// CREATE's body: six u32 then the 64-byte congAlg name.
const CREATE_BODY_BYTES: usize = 6 * 4 + CONG_ALG_BYTES;
const CONG_ALG_BYTES: usize = 64;
// After the NUL of the name in congAlg, ccp.ko says what CREATE's own fields cannot (see
// `ccp_describe_addresses` and `ccp_describe_flow` in datapath/ccp_main.c): at EXT_AT a u32,
// EXT_MAGIC with flags; with EXT_IPV6 the IPv6 source and destination at EXT_V6_AT; with
// EXT_STATE the flow's state at EXT_STATE_AT (ssthresh, srtt, min RTT, agent rate); EXT_UNDO
// (no data): the datapath reports the kernel's undos in `Ack.ecn_bytes` (crate::program, "Undo").
const NAME_BYTES: usize = 12;
const EXT_AT: usize = 12;
const EXT_MAGIC: u32 = 0x5043_0000;
const EXT_MAGIC_MASK: u32 = 0xffff_0000;
const EXT_STATE: u32 = 0x1;
const EXT_IPV6: u32 = 0x2;
const EXT_UNDO: u32 = 0x4;
const EXT_V6_AT: usize = 16;
const EXT_STATE_AT: usize = 48;

/// A datapath message the agent cannot use.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("message of {0} bytes is shorter than the 8-byte header")]
    ShortHeader(usize),
    #[error("header length {len} is outside [8, {available}] (bytes received)")]
    BadLength { len: usize, available: usize },
    #[error("{kind} message of {len} bytes is too short (needs {needed})")]
    ShortBody { kind: &'static str, len: usize, needed: usize },
}

/// What a flow's CREATE says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Create {
    pub sid: u32,
    /// Initial window as the datapath sends it (ccp-kernel: bytes).
    pub init_cwnd: u32,
    pub mss: u32,
    /// IPv4, or IPv6 when the datapath sends the addresses after the name.
    pub src: IpAddr,
    pub src_port: u16,
    pub dst: IpAddr,
    pub dst_port: u16,
    /// The congAlg the socket asked for ("ccp" from the polycc module), lossy UTF-8.
    pub cong_alg: String,
    /// The flow's state when the datapath re-announces a live flow to a new agent (`init_cwnd`
    /// is then its current window); `None` for a new flow.
    pub adopted: Option<Adoption>,
    /// The datapath reports the kernel's undos of spurious loss reductions (`Ack.ecn_bytes`
    /// carries them; see [`crate::program`], "Undo").
    pub undo_signal: bool,
}

/// A live flow's state as the datapath describes it in a re-sent CREATE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adoption {
    /// Slow-start threshold in bytes; `None`: the flow is in slow start.
    pub ssthresh: Option<u32>,
    /// Smoothed and minimum RTT in microseconds; `None`: not measured yet.
    pub srtt_us: Option<u32>,
    pub min_rtt_us: Option<u32>,
    /// The `Rate` register an agent set (bytes/s; [`crate::convert::rate_from_register`] reads
    /// it as a rate); `None`: unpaced.
    pub rate: Option<u32>,
}

impl Adoption {
    fn parse(state: &[u8]) -> Adoption {
        let at = |i: usize| u32_at(state, 4 * i);
        let nonzero = |v: u32| (v != 0).then_some(v);
        Adoption {
            ssthresh: (at(0) != u32::MAX).then_some(at(0)),
            srtt_us: nonzero(at(1)),
            min_rtt_us: nonzero(at(2)),
            rate: nonzero(at(3)),
        }
    }

    fn write(&self, state: &mut [u8]) {
        let values = [
            self.ssthresh.unwrap_or(u32::MAX),
            self.srtt_us.unwrap_or(0),
            self.min_rtt_us.unwrap_or(0),
            self.rate.unwrap_or(0),
        ];
        for (i, v) in values.into_iter().enumerate() {
            state[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// The flags of congAlg's extension word, when its magic is there.
fn ext_flags(cong_alg: &[u8]) -> u32 {
    let ext = u32_at(cong_alg, EXT_AT);
    if ext & EXT_MAGIC_MASK == EXT_MAGIC {
        ext & !EXT_MAGIC_MASK
    } else {
        0
    }
}

fn v6_at(cong_alg: &[u8], at: usize) -> IpAddr {
    let mut b = [0u8; 16];
    b.copy_from_slice(&cong_alg[at..at + 16]);
    IpAddr::V6(Ipv6Addr::from(b))
}

/// A MEASURE's fields, read in place from the received bytes (little-endian u64 each): the
/// agent copies a report once, into the schema ([`crate::program::Program::read`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Field `i`, if the message has it.
    pub fn get(&self, i: usize) -> Option<u64> {
        (i < self.len()).then(|| u64_at(self.bytes, 8 * i))
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.bytes.chunks_exact(8).map(|b| u64_at(b, 0))
    }
}

impl std::fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A datapath -> agent message, borrowing the received bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Create(Create),
    /// A report; no fields means the flow closed (libccp's `ccp_connection_free`).
    Measure {
        sid: u32,
        program_uid: u32,
        fields: Fields<'a>,
    },
    Ready {
        id: u32,
    },
    /// A type the agent does not take from a datapath (it is logged and skipped).
    Other {
        typ: u16,
        sid: u32,
        len: usize,
    },
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// A message header: (type, length, socket id), the length checked against `buf`.
fn header(buf: &[u8]) -> Result<(u16, usize, u32), WireError> {
    if buf.len() < HEADER_BYTES {
        return Err(WireError::ShortHeader(buf.len()));
    }
    let len = usize::from(u16_at(buf, 2));
    if len < HEADER_BYTES || len > buf.len() {
        return Err(WireError::BadLength { len, available: buf.len() });
    }
    Ok((u16_at(buf, 0), len, u32_at(buf, 4)))
}

/// Parse the first message of `buf`; returns it and the bytes it used.
pub fn parse(buf: &[u8]) -> Result<(Message<'_>, usize), WireError> {
    let (typ, len, sid) = header(buf)?;
    let body = &buf[HEADER_BYTES..len];
    let need = |kind, needed: usize| {
        if body.len() < needed {
            Err(WireError::ShortBody { kind, len, needed: needed + HEADER_BYTES })
        } else {
            Ok(())
        }
    };
    let msg = match typ {
        CREATE => {
            need("CREATE", CREATE_BODY_BYTES)?;
            let name = &body[24..24 + CONG_ALG_BYTES];
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            // The extension only follows a name that ends inside its 12 bytes.
            let flags = if end < NAME_BYTES { ext_flags(name) } else { 0 };
            // As ccp-kernel fills them: addresses and ports in network byte order (a port is a
            // `__be16` widened to u32), read here as the little-endian u32 libccp writes.
            let v4 = |at: usize| IpAddr::V4(Ipv4Addr::from(u32::from_be(u32_at(body, at))));
            let v6 = flags & EXT_IPV6 != 0;
            Message::Create(Create {
                sid,
                init_cwnd: u32_at(body, 0),
                mss: u32_at(body, 4),
                src: if v6 { v6_at(name, EXT_V6_AT) } else { v4(8) },
                src_port: u16::from_be(u32_at(body, 12) as u16),
                dst: if v6 { v6_at(name, EXT_V6_AT + 16) } else { v4(16) },
                dst_port: u16::from_be(u32_at(body, 20) as u16),
                cong_alg: String::from_utf8_lossy(&name[..end]).into_owned(),
                adopted: (flags & EXT_STATE != 0).then(|| Adoption::parse(&name[EXT_STATE_AT..])),
                undo_signal: flags & EXT_UNDO != 0,
            })
        }
        MEASURE => {
            need("MEASURE", 8)?;
            let program_uid = u32_at(body, 0);
            let n = u32_at(body, 4) as usize;
            need("MEASURE", 8usize.saturating_add(n.saturating_mul(8)))?;
            let fields = Fields { bytes: &body[8..8 + 8 * n] };
            Message::Measure { sid, program_uid, fields }
        }
        READY => {
            need("READY", 4)?;
            Message::Ready { id: u32_at(body, 0) }
        }
        _ => Message::Other { typ, sid, len },
    };
    Ok((msg, len))
}

/// UPDATE_FIELDS for one flow (`num_fields` is one byte on the wire: at most a few here).
pub fn update_fields(sid: u32, fields: Vec<(Reg, u64)>) -> Vec<u8> {
    let msg = portus::serialize::update_field::Msg { sid, num_fields: fields.len() as u8, fields };
    portus::serialize::serialize(&msg).expect("UPDATE_FIELDS of control/implicit registers always serializes")
}

/// CHANGE_PROG: run program `program_uid` on the flow, with initial register values.
pub fn change_prog(sid: u32, program_uid: u32, fields: Vec<(Reg, u64)>) -> Vec<u8> {
    let msg = portus::serialize::changeprog::Msg { sid, program_uid, num_fields: fields.len() as u32, fields };
    portus::serialize::serialize(&msg).expect("CHANGE_PROG of control/implicit registers always serializes")
}

/// A register as the wire names it: `{u8 type, u32 index}` (portus' serializer).
pub type RegId = [u8; REG_BYTES];
const REG_BYTES: usize = 5;
/// One `(register, value)` pair in UPDATE_FIELDS and CHANGE_PROG.
const FIELD_BYTES: usize = REG_BYTES + 8;

/// The wire name of `reg` (what [`update_fields`] writes for it).
pub fn reg_id(reg: &Reg) -> RegId {
    let msg = update_fields(0, vec![(reg.clone(), 0)]);
    let mut id = [0; REG_BYTES];
    id.copy_from_slice(&msg[HEADER_BYTES + 4..HEADER_BYTES + 4 + REG_BYTES]);
    id
}

/// An agent -> datapath message, as a datapath that is not libccp (the BPF transport) reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToDatapath {
    /// A program for every flow (nothing to do for a datapath with a built-in program).
    Install,
    ChangeProg {
        sid: u32,
        program_uid: u32,
        fields: Vec<(RegId, u64)>,
    },
    UpdateFields {
        sid: u32,
        fields: Vec<(RegId, u64)>,
    },
    Other {
        typ: u16,
    },
}

/// Parse what the agent sends (its own serializers' output; still checked, never trusted).
pub fn parse_to_datapath(buf: &[u8]) -> Result<ToDatapath, WireError> {
    let (typ, len, sid) = header(buf)?;
    let msg = &buf[..len];
    let fields = |kind, at: usize| -> Result<Vec<(RegId, u64)>, WireError> {
        if msg.len() < at {
            return Err(WireError::ShortBody { kind, len, needed: at });
        }
        let n = u32_at(msg, at - 4) as usize;
        let needed = at.saturating_add(n.saturating_mul(FIELD_BYTES));
        if msg.len() < needed {
            return Err(WireError::ShortBody { kind, len, needed });
        }
        Ok((0..n)
            .map(|i| {
                let f = at + FIELD_BYTES * i;
                let mut id = [0; REG_BYTES];
                id.copy_from_slice(&msg[f..f + REG_BYTES]);
                (id, u64_at(msg, f + REG_BYTES))
            })
            .collect())
    };
    Ok(match typ {
        INSTALL => ToDatapath::Install,
        UPDATE_FIELDS => ToDatapath::UpdateFields { sid, fields: fields("UPDATE_FIELDS", HEADER_BYTES + 4)? },
        CHANGE_PROG => {
            let fields = fields("CHANGE_PROG", HEADER_BYTES + 8)?;
            ToDatapath::ChangeProg { sid, program_uid: u32_at(msg, HEADER_BYTES), fields }
        }
        _ => ToDatapath::Other { typ },
    })
}

/// Build datapath -> agent messages (tests and the benchmark).
pub mod build {
    use super::*;

    fn header(typ: u16, len: usize, sid: u32) -> Vec<u8> {
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&typ.to_le_bytes());
        m.extend_from_slice(&(len as u16).to_le_bytes());
        m.extend_from_slice(&sid.to_le_bytes());
        m
    }

    /// As ccp.ko writes it; a name is cut to 11 bytes when the extension is needed.
    pub fn create(c: &Create) -> Vec<u8> {
        let mut m = header(CREATE, HEADER_BYTES + CREATE_BODY_BYTES, c.sid);
        let v4 = |ip: IpAddr| match ip {
            IpAddr::V4(a) => u32::from(a).to_be(),
            IpAddr::V6(_) => 0,
        };
        for v in
            [c.init_cwnd, c.mss, v4(c.src), u32::from(c.src_port.to_be()), v4(c.dst), u32::from(c.dst_port.to_be())]
        {
            m.extend_from_slice(&v.to_le_bytes());
        }
        let mut name = [0u8; CONG_ALG_BYTES];
        let mut flags = 0;
        if let (IpAddr::V6(src), IpAddr::V6(dst)) = (c.src, c.dst) {
            name[EXT_V6_AT..EXT_V6_AT + 16].copy_from_slice(&src.octets());
            name[EXT_V6_AT + 16..EXT_V6_AT + 32].copy_from_slice(&dst.octets());
            flags |= EXT_IPV6;
        }
        if let Some(a) = &c.adopted {
            a.write(&mut name[EXT_STATE_AT..]);
            flags |= EXT_STATE;
        }
        if c.undo_signal {
            flags |= EXT_UNDO;
        }
        let room = if flags != 0 { NAME_BYTES - 1 } else { CONG_ALG_BYTES - 1 };
        let n = c.cong_alg.len().min(room);
        name[..n].copy_from_slice(&c.cong_alg.as_bytes()[..n]);
        if flags != 0 {
            name[EXT_AT..EXT_AT + 4].copy_from_slice(&(EXT_MAGIC | flags).to_le_bytes());
        }
        m.extend_from_slice(&name);
        m
    }

    pub fn measure(sid: u32, program_uid: u32, fields: &[u64]) -> Vec<u8> {
        let mut m = header(MEASURE, HEADER_BYTES + 8 + 8 * fields.len(), sid);
        m.extend_from_slice(&program_uid.to_le_bytes());
        m.extend_from_slice(&(fields.len() as u32).to_le_bytes());
        for f in fields {
            m.extend_from_slice(&f.to_le_bytes());
        }
        m
    }

    pub fn ready(id: u32) -> Vec<u8> {
        let mut m = header(READY, HEADER_BYTES + 4, 0);
        m.extend_from_slice(&id.to_le_bytes());
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create() -> Create {
        Create {
            sid: 7,
            init_cwnd: 14_480,
            mss: 1448,
            src: Ipv4Addr::new(10, 0, 0, 1).into(),
            src_port: 5201,
            dst: Ipv4Addr::new(10, 0, 0, 2).into(),
            dst_port: 40_000,
            cong_alg: "ccp".into(),
            adopted: None,
            undo_signal: false,
        }
    }

    #[test]
    fn an_adopted_flow_carries_its_state_after_the_name() {
        let mut c = create();
        c.adopted =
            Some(Adoption { ssthresh: Some(300_000), srtt_us: Some(104_000), min_rtt_us: Some(100_100), rate: None });
        let bytes = build::create(&c);
        assert_eq!(parse(&bytes), Ok((Message::Create(c.clone()), 96)));
        // A reader that stops at the NUL (portus) still sees "ccp".
        let name = &bytes[HEADER_BYTES + 24..];
        assert_eq!(&name[..4], b"ccp\0");
        // An IPv6 flow, adopted too: both ride after the name, the IPv4 fields are 0.
        let mut v6 = c.clone();
        v6.src = "2001:db8::1".parse().unwrap();
        v6.dst = "2001:db8:0:1::2".parse().unwrap();
        let bytes = build::create(&v6);
        assert_eq!(u32_at(&bytes, HEADER_BYTES + 8), 0);
        assert_eq!(parse(&bytes), Ok((Message::Create(v6.clone()), 96)));
        v6.adopted = None;
        assert_eq!(parse(&build::create(&v6)), Ok((Message::Create(v6), 96)));
        // Slow start and nothing measured read back as None, not as zeros or u32::MAX.
        c.adopted = Some(Adoption { ssthresh: None, srtt_us: None, min_rtt_us: None, rate: Some(2_500_000) });
        assert_eq!(parse(&build::create(&c)), Ok((Message::Create(c.clone()), 96)));
        // A datapath that reports undos says so in the same word, with or without the rest.
        c.undo_signal = true;
        assert_eq!(parse(&build::create(&c)), Ok((Message::Create(c.clone()), 96)));
        c.adopted = None;
        let bytes = build::create(&c);
        assert_eq!(u32_at(&bytes, HEADER_BYTES + 24 + EXT_AT), EXT_MAGIC | EXT_UNDO);
        assert_eq!(parse(&bytes), Ok((Message::Create(c), 96)));
    }

    #[test]
    fn messages_round_trip() {
        let c = create();
        let bytes = build::create(&c);
        assert_eq!(bytes.len(), 96, "CREATE is 96 bytes (reference: IPC)");
        assert_eq!(parse(&bytes), Ok((Message::Create(c), 96)));
        let m = build::measure(7, 1, &[1, 2, 3]);
        let Ok((Message::Measure { sid: 7, program_uid: 1, fields }, 40)) = parse(&m) else { panic!("{:?}", parse(&m)) };
        assert_eq!((fields.iter().collect::<Vec<_>>(), fields.get(2), fields.get(3)), (vec![1, 2, 3], Some(3), None));
        assert_eq!(format!("{fields:?}"), "[1, 2, 3]");
        assert_eq!(parse(&build::ready(9)), Ok((Message::Ready { id: 9 }, 12)));
        // Two messages in one buffer parse one after the other.
        let mut two = build::ready(1);
        two.extend(build::measure(3, 1, &[]));
        let (_, used) = parse(&two).unwrap();
        assert!(matches!(parse(&two[used..]).unwrap().0, Message::Measure { sid: 3, program_uid: 1, fields } if fields.is_empty()));
    }

    #[test]
    fn agent_messages_decode_for_translating_datapaths() {
        let cwnd = Reg::Implicit(4, portus::lang::Type::Num(None));
        let ctl = Reg::Control(2, portus::lang::Type::Num(None), false);
        let id = reg_id(&cwnd);
        assert_eq!(id, [2, 4, 0, 0, 0], "portus: Implicit is type 2");
        let m = update_fields(9, vec![(cwnd.clone(), 14_480), (ctl.clone(), 5)]);
        assert_eq!(
            parse_to_datapath(&m),
            Ok(ToDatapath::UpdateFields { sid: 9, fields: vec![(id, 14_480), (reg_id(&ctl), 5)] })
        );
        let m = change_prog(4, 1, vec![(cwnd, 2896)]);
        assert_eq!(
            parse_to_datapath(&m),
            Ok(ToDatapath::ChangeProg { sid: 4, program_uid: 1, fields: vec![(id, 2896)] })
        );
        let mut short = update_fields(9, vec![(ctl, 1)]);
        short[8] = 200; // more fields than the message holds
        assert!(matches!(parse_to_datapath(&short), Err(WireError::ShortBody { kind: "UPDATE_FIELDS", .. })));
        assert_eq!(parse_to_datapath(&[1, 2]), Err(WireError::ShortHeader(2)));
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        assert_eq!(parse(&[1, 0, 8]), Err(WireError::ShortHeader(3)));
        let mut m = build::measure(1, 1, &[5, 6]);
        m[2] = 200; // length beyond the buffer
        assert!(matches!(parse(&m), Err(WireError::BadLength { len: 200, .. })));
        let mut m = build::measure(1, 1, &[5, 6]);
        m[12] = 0xff; // num_fields far beyond the message
        assert!(matches!(parse(&m), Err(WireError::ShortBody { kind: "MEASURE", .. })));
        let c = build::create(&create());
        let mut short = c[..40].to_vec();
        short[2] = 40;
        assert!(matches!(parse(&short), Err(WireError::ShortBody { kind: "CREATE", .. })));
        // A congAlg without its NUL is taken whole; an unknown type is reported as Other.
        let mut c = c;
        c[32..96].fill(b'x');
        assert!(matches!(parse(&c), Ok((Message::Create(Create { ref cong_alg, .. }), _)) if cong_alg.len() == 64));
        let mut other = build::ready(1);
        other[0] = UPDATE_FIELDS as u8;
        assert_eq!(parse(&other).unwrap().0, Message::Other { typ: UPDATE_FIELDS, sid: 0, len: 12 });
        // Random bytes never panic.
        let mut x: u32 = 0x9e37_79b9;
        for n in 0..2000 {
            let bytes: Vec<u8> = (0..n % 120)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = parse(&bytes);
        }
    }
}
