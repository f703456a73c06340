// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for the agent-message validator and the hardened libccp behind it (issue 16,
 * item 7): the C the module compiles, built for user space with
 * -fsanitize=fuzzer,address,undefined (make -C datapath fuzz).
 *
 * Every input is read three ways:
 *  1. raw: the bytes as one message, as the netlink path hands them to ccp_validate_msg() (copied
 *     into a buffer of exactly their length, aligned like nlmsg_data());
 *  2. repaired: the bytes as a sequence of wire-format messages whose type (INSTALL_EXPR,
 *     UPDATE_FIELDS or CHANGE_PROG), header length, socket id and counts are made consistent
 *     with what follows (counts cut to the bytes present) while every other field is kept as
 *     given; a valid message reads as itself, so the seeds serve both readings;
 *  3. shaped: a compact encoding (a byte per opcode, register type and register index; counts,
 *     expression ranges and indices folded into their legal ranges or just past them) that makes
 *     mostly valid programs and updates with random content, so libccp's interpreter runs them;
 *     a message starting with 0xff there stands for a new agent (the module empties the program
 *     table).
 * Whatever the validator accepts goes to ccp_read_msg() on a fresh datapath whose flows run a
 * program; after an INSTALL the flows switch to the new program, and every flow is invoked with
 * random measurements, so a validator gap becomes an ASan/UBSan report. dp_send() checks what
 * libccp sends back (lengths, report field counts) and aborts on a malformed message.
 *
 * Built with -DFUZZ_SEEDGEN it is a program instead: it writes the seed corpus (a valid message
 * of each agent -> datapath type, the datapath -> agent types, a sequence) into the directory
 * named on its command line, after running each one through the validator and libccp.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccp.h"
#include "ccp_priv.h"
#include "ccp_validate.h"
#include "ccp_msg.h"

#define MAX_FLOWS 4	/* the flow table, and max_flows for the validator */
#define LIVE_FLOWS 3	/* sid 4 passes the validator but names no live flow */
#define MAX_PROGRAMS 4
#define BASE_UID 3	/* the program the flows run before the fuzzed messages */
#define MAX_SEQUENCE 4	/* messages per input in the repaired and shaped readings */
#define INVOKES 3	/* ccp_invoke() rounds over the flows after each accepted message */

static void harness_bug(const char *what)
{
	fprintf(stderr, "fuzz_validate: %s\n", what);
	abort();
}

/* ---- random numbers (seeded from the input: every run is reproducible) ---------------------- */

static u64 rng_state;

static u64 next_random(void)
{
	u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static u64 hash_input(const uint8_t *p, size_t n)
{
	u64 h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

/* ---- a user-space libccp datapath ---------------------------------------------------------- */

static u64 fake_now_us;
static int send_may_fail;	/* once set up, one send in 8 fails: libccp's fallback paths */
static volatile u64 sink;	/* keeps the reads of libccp's output from being optimised out */

static void dp_set_cwnd(struct ccp_connection *conn, u32 cwnd) { sink += cwnd + conn->index; }
static void dp_set_rate(struct ccp_connection *conn, u32 rate) { sink += rate + conn->index; }
static u64 dp_now(void) { return fake_now_us; }
static u64 dp_since(u64 then) { return fake_now_us > then ? fake_now_us - then : 0; }
static u64 dp_after(u64 us) { return fake_now_us + us; }

/* As the module's ccp_log(): printk's "%.*s" reads up to the NUL or `len` bytes. */
static void dp_log(struct ccp_datapath *d, enum ccp_log_level l, const char *m, int len)
{
	size_t i, n = strnlen(m, len > 0 ? (size_t)len : 0);

	(void)d;
	for (i = 0; i < n; i++)
		sink += (u8)m[i] + l;
}

/* Everything libccp sends must be a well-formed CREATE, MEASURE or READY of its stated length. */
static int dp_send(struct ccp_datapath *d, char *msg, int len)
{
	struct CcpMsgHeader h;
	u32 fields;
	int i;

	(void)d;
	if (len < (int)sizeof(h) || len > REPORT_MSG_SIZE)
		harness_bug("libccp sent a message of impossible length");
	memcpy(&h, msg, sizeof(h));
	if (h.Len != len)
		harness_bug("libccp sent a message whose header length disagrees with its size");
	if (h.Type == MEASURE) {
		memcpy(&fields, msg + sizeof(h) + sizeof(u32), sizeof(fields));
		if (fields > MAX_REPORT_REG || (size_t)len != sizeof(h) + 2 * sizeof(u32) + fields * sizeof(u64))
			harness_bug("libccp sent a report with more fields than a measurement holds");
	} else if (h.Type != CREATE && h.Type != READY) {
		harness_bug("libccp sent a message of an unexpected type");
	}
	for (i = 0; i < len; i++)	/* every byte read: ASan checks the whole buffer */
		sink += (u8)msg[i];
	if (send_may_fail && (next_random() & 7) == 0)
		return -1;
	return 0;
}

static struct ccp_datapath dp;
static struct ccp_connection conns[MAX_FLOWS];
static struct ccp_connection *live[LIVE_FLOWS];
static int session_open;
static int last_read_ret;	/* what ccp_read_msg() said of the last valid message */

/* ---- message builders (the wire format of tests/validate_test.c) --------------------------- */

/* struct msg, put, header, finish, instr, put_update: ccp_msg.h */

static void build_program(struct msg *m, u32 uid, const struct ExpressionMsg *e, u32 n_expr,
			  const struct InstructionMsg *i, u32 n_instr)
{
	struct InstallExpressionMsgHdr h = { .program_uid = uid, .num_expressions = n_expr,
					     .num_instructions = n_instr };

	header(m, INSTALL_EXPR, 0);
	put(m, &h, sizeof(h));
	put(m, e, n_expr * sizeof(*e));
	put(m, i, n_instr * sizeof(*i));
	finish(m);
}

/* The program of validate_test.c: acked bytes and the RTT reported once per RTT. */
static void build_base_program(struct msg *m, u32 uid)
{
	static const struct ExpressionMsg e[2] = {
		{ .cond_start_idx = 2, .num_cond_instrs = 1, .event_start_idx = 3, .num_event_instrs = 3 },
		{ .cond_start_idx = 6, .num_cond_instrs = 1, .event_start_idx = 7, .num_event_instrs = 1 },
	};
	const struct InstructionMsg i[8] = {
		instr(DEF, VOLATILE_REPORT_REG, 0, VOLATILE_REPORT_REG, 0, IMMEDIATE_REG, 0),
		instr(DEF, NONVOLATILE_REPORT_REG, 1, NONVOLATILE_REPORT_REG, 1, IMMEDIATE_REG, 0),
		instr(BIND, IMPLICIT_REG, EXPR_FLAG_REG, IMPLICIT_REG, EXPR_FLAG_REG, IMMEDIATE_REG, 1),
		instr(ADD, VOLATILE_REPORT_REG, 0, VOLATILE_REPORT_REG, 0, PRIMITIVE_REG, ACK_BYTES_ACKED),
		instr(BIND, NONVOLATILE_REPORT_REG, 1, NONVOLATILE_REPORT_REG, 1, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(BIND, IMPLICIT_REG, SHOULD_FALLTHROUGH_REG, IMPLICIT_REG, SHOULD_FALLTHROUGH_REG, IMMEDIATE_REG, 1),
		instr(GT, IMPLICIT_REG, EXPR_FLAG_REG, IMPLICIT_REG, US_ELAPSED_REG, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(BIND, IMPLICIT_REG, SHOULD_REPORT_REG, IMPLICIT_REG, SHOULD_REPORT_REG, IMMEDIATE_REG, 1),
	};

	build_program(m, uid, e, 2, i, 8);
}

static void build_change(struct msg *m, u32 sid, u32 uid, u32 n_updates)
{
	struct ChangeProgMsg c = { .program_uid = uid, .num_updates = n_updates };
	u32 k;

	header(m, CHANGE_PROG, sid);
	put(m, &c, sizeof(c));
	for (k = 0; k < n_updates; k++)
		put_update(m, IMPLICIT_REG, CWND_REG, 10 * 1448 * (k + 1));
	finish(m);
}

/* ---- driving libccp ------------------------------------------------------------------------- */

/* The harness's own messages (setup, program switches) must pass and apply. */
static void apply_own(struct msg *m, int must_apply)
{
	int ret;

	if (ccp_validate_msg(m->buf, m->len, MAX_FLOWS) != CCP_VALID)
		harness_bug("the validator refused a message the harness built");
	ret = ccp_read_msg(&dp, m->buf, (int)m->len);
	if (must_apply && ret < 0)
		harness_bug("libccp refused a message the harness built");
}

static u64 random_value(void)
{
	static const u64 edge[8] = { 0, 1, 1448, 0x3fffffff, 0x7fffffff, 0xffffffff,
				     0x100000000ull, ~0ull };
	u64 r = next_random();

	return (r & 3) == 0 ? edge[(r >> 2) & 7] : r >> (r & 63);
}

static void invoke_all(int rounds)
{
	struct ccp_primitives *p;
	int k, i;

	for (k = 0; k < rounds; k++) {
		for (i = 0; i < LIVE_FLOWS; i++) {
			p = &live[i]->prims;
			p->bytes_acked = (u32)random_value();
			p->packets_acked = (u32)random_value();
			p->bytes_misordered = (u32)random_value();
			p->packets_misordered = (u32)random_value();
			p->ecn_bytes = (u32)random_value();
			p->ecn_packets = (u32)random_value();
			p->lost_pkts_sample = (u32)random_value();
			p->was_timeout = next_random() & 1;
			p->rtt_sample_us = random_value();
			p->rate_outgoing = random_value();
			p->rate_incoming = random_value();
			p->bytes_in_flight = (u32)random_value();
			p->packets_in_flight = (u32)random_value();
			p->snd_cwnd = (u32)random_value();
			p->snd_rate = random_value();
			p->bytes_pending = (u32)random_value();
			fake_now_us += next_random() % 200000;
			ccp_invoke(live[i]);
		}
	}
}

static void switch_program(struct ccp_connection *c, u32 uid)
{
	static struct msg m;

	build_change(&m, c->index, uid, (u32)(next_random() % 3));
	apply_own(&m, 1);
}

/* A datapath with LIVE_FLOWS flows running the base program; max_programs 4. */
static void session_start(u64 seed)
{
	static const struct ccp_datapath callbacks = {
		.set_cwnd = dp_set_cwnd, .set_rate_abs = dp_set_rate, .send_msg = dp_send,
		.log = dp_log, .now = dp_now, .since_usecs = dp_since, .after_usecs = dp_after,
	};
	static struct msg m;
	int i;

	rng_state = seed;
	fake_now_us = 1000000;
	send_may_fail = 0;
	if (test_datapath_init(&dp, &callbacks, conns, MAX_FLOWS, MAX_PROGRAMS) != LIBCCP_OK)
		harness_bug("ccp_init failed");
	for (i = 0; i < LIVE_FLOWS; i++) {
		live[i] = ccp_connection_start(&dp, NULL, (struct ccp_datapath_info *)&test_flow_info);
		if (!live[i] || live[i]->index != i + 1)
			harness_bug("ccp_connection_start failed");
	}
	build_base_program(&m, BASE_UID);
	apply_own(&m, 1);
	for (i = 0; i < LIVE_FLOWS; i++)
		switch_program(live[i], BASE_UID);
	invoke_all(1);
	send_may_fail = 1;
	session_open = 1;
}

static void session_end(void)
{
	int i;

	if (!session_open)
		return;
	for (i = 0; i < LIVE_FLOWS; i++)
		ccp_connection_free(&dp, live[i]->index);
	ccp_free(&dp);
	session_open = 0;
}

/*
 * A new agent, as ccp_main.c's ccp_reannounce_flows() handles it: the program table emptied, every
 * flow without a program, staged change or update, and re-sending CREATE on its next ACK.
 */
static void reannounce_flows(void)
{
	struct ccp_priv_state *state;
	int i;

	memset(dp.programs, 0, dp.max_programs * sizeof(struct DatapathProgram));
	for (i = 0; i < LIVE_FLOWS; i++) {
		state = get_ccp_priv_state(live[i]);
		state->program_index = 0;
		state->staged_program_index = -1;
		state->sent_create = false;
		live[i]->last_create_msg_sent = 0;
		memset(&state->pending_update, 0, sizeof(state->pending_update));
	}
}

/*
 * One candidate message: validated in a buffer of exactly its length (malloc aligns as netlink
 * does, to 4 or more; ASan sees any read past the end); libccp reads it only if it is valid.
 */
static enum ccp_invalid deliver(const void *msg, size_t len, u64 seed)
{
	struct CcpMsgHeader h;
	enum ccp_invalid why;
	char *copy;
	u32 uid;
	int ret, i;

	copy = malloc(len ? len : 1);
	if (!copy)
		harness_bug("out of memory");
	memcpy(copy, msg, len);
	why = ccp_validate_msg(copy, len, MAX_FLOWS);
	if (why != CCP_VALID) {
		free(copy);
		return why;
	}
	if (!session_open)
		session_start(seed);
	ret = ccp_read_msg(&dp, copy, (int)len);
	last_read_ret = ret;
	memcpy(&h, copy, sizeof(h));
	memcpy(&uid, copy + sizeof(h) + offsetof(struct InstallExpressionMsgHdr, program_uid), sizeof(uid));
	free(copy);	/* libccp keeps no pointer into a message: a use after free would show */
	if (h.Type == INSTALL_EXPR && ret == LIBCCP_OK) {
		/* flow 1 stays where it was (an in-place reinstall may change its program under it) */
		for (i = 1; i < LIVE_FLOWS; i++)
			switch_program(live[i], uid);
	}
	invoke_all(INVOKES);
	return why;
}

/* ---- reading an input ----------------------------------------------------------------------- */

struct reader {
	const uint8_t *p;
	size_t left;
};

/* n bytes from the input, zeros past its end */
static void take(struct reader *r, void *out, size_t n)
{
	size_t k = n < r->left ? n : r->left;

	memcpy(out, r->p, k);
	memset((char *)out + k, 0, n - k);
	r->p += k;
	r->left -= k;
}

static u8 take8(struct reader *r)
{
	u8 v;

	take(r, &v, 1);
	return v;
}

static u32 min_u32(u32 a, size_t b)
{
	return (size_t)a < b ? a : (u32)b;
}

/* 2. The next wire-format message with a consistent header and counts, its fields as given. */
static int read_repaired(struct reader *r, struct msg *m)
{
	struct InstallExpressionMsgHdr ih;
	struct ChangeProgMsg cp;
	struct CcpMsgHeader h;
	size_t n;
	u32 count;

	if (r->left < sizeof(h))
		return 0;
	take(r, &h, sizeof(h));
	if (h.Type < INSTALL_EXPR || h.Type > CHANGE_PROG)
		h.Type = INSTALL_EXPR + h.Type % 3;
	if (h.Type != INSTALL_EXPR && h.SocketId > MAX_FLOWS + 1)
		h.SocketId %= MAX_FLOWS + 2;
	header(m, h.Type, h.SocketId);
	switch (h.Type) {
	case INSTALL_EXPR:
		take(r, &ih, sizeof(ih));
		/* up to one past libccp's limits; then cut to the bytes present */
		ih.num_expressions %= MAX_EXPRESSIONS + 2;
		ih.num_instructions %= CCP_MAX_PROGRAM_INSTRUCTIONS + 2;
		ih.num_expressions = min_u32(ih.num_expressions, r->left / sizeof(struct ExpressionMsg));
		ih.num_instructions = min_u32(ih.num_instructions,
					      (r->left - ih.num_expressions * sizeof(struct ExpressionMsg)) /
					      sizeof(struct InstructionMsg));
		put(m, &ih, sizeof(ih));
		n = ih.num_expressions * sizeof(struct ExpressionMsg) +
		    ih.num_instructions * sizeof(struct InstructionMsg);
		break;
	case UPDATE_FIELDS:
		take(r, &count, sizeof(count));
		count %= MAX_MUTABLE_REG + 2;
		count = min_u32(count, r->left / sizeof(struct UpdateField));
		put(m, &count, sizeof(count));
		n = count * sizeof(struct UpdateField);
		break;
	default:
		take(r, &cp, sizeof(cp));
		cp.num_updates %= MAX_MUTABLE_REG + 2;
		cp.num_updates = min_u32(cp.num_updates, r->left / sizeof(struct UpdateField));
		put(m, &cp, sizeof(cp));
		n = cp.num_updates * sizeof(struct UpdateField);
		break;
	}
	put(m, r->p, n);
	r->p += n;
	r->left -= n;
	finish(m);
	return 1;
}

/* 3. The shaped encoding: every value folded into its legal range, or just past it. */

/* A count: mostly 0-15; 0xe0-0xfd spread up to `limit`; 0xfe the limit; 0xff one past it. */
static u32 shape_count(u8 b, u32 limit)
{
	if (b < 0xe0)
		return b % 16 < limit ? b % 16 : limit;
	if (b == 0xfe)
		return limit;
	if (b == 0xff)
		return limit + 1;
	return (u32)(b - 0xe0) * limit / 30;
}

static const u32 edge32[16] = { 0, 1, 2, 8, 10, 100, 110, 255, 1448, 14480, 1000000, 0x3fffffff,
				0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff };

/* An index (or immediate) for a register type: 0xff names the first register past the end. */
static u32 shape_index(u8 type, u8 b)
{
	u32 limit;

	if (type == IMMEDIATE_REG)
		return b >= 0xf0 ? edge32[b - 0xf0] : b;
	limit = (u32)ccp_reg_limit(type);	/* the validator's own table; < 2^32 past immediates */
	if (!limit)
		return b;
	return b == 0xff ? limit : b % limit;
}

static void shape_instruction(struct reader *r, struct InstructionMsg *i)
{
	static const u8 writable[7] = { NONVOLATILE_CONTROL_REG, IMPLICIT_REG, LOCAL_REG,
					VOLATILE_REPORT_REG, NONVOLATILE_REPORT_REG, TMP_REG,
					VOLATILE_CONTROL_REG };
	u8 b[7];

	take(r, b, sizeof(b));
	i->opcode = b[0] == 0xff ? MAX_OP : b[0] % MAX_OP;
	i->result_reg_type = b[1] == 0xff ? 9 : b[1] == 0xfe ? IMMEDIATE_REG :
			     b[1] == 0xfd ? PRIMITIVE_REG : writable[b[1] % 7];
	i->result_register = shape_index(i->result_reg_type, b[2]);
	i->left_reg_type = b[3] == 0xff ? 9 : b[3] % 9;
	i->left_register = shape_index(i->left_reg_type, b[4]);
	i->right_reg_type = b[5] == 0xff ? 9 : b[5] % 9;
	i->right_register = shape_index(i->right_reg_type, b[6]);
}

/* An instruction range inside n instructions; 0xff reaches one past the end. */
static void shape_range(u8 bs, u8 bn, u32 n, u32 *start, u32 *num)
{
	*start = bs == 0xff ? n + 1 : bs % (n + 1);
	if (*start > n)
		*num = 0;
	else
		*num = bn == 0xff ? n - *start + 1 : bn % (n - *start + 1);
}

static void shape_updates(struct reader *r, struct msg *m, u32 n)
{
	static const u8 types[3] = { NONVOLATILE_CONTROL_REG, VOLATILE_CONTROL_REG, IMPLICIT_REG };
	static const u64 edge64[16] = { 0, 1, 2, 1448, 14480, 1000000, 125000000, 0x3fffffff,
					0x7fffffff, 0xffffffff, 0x100000000ull, 0xffffffffffull,
					0x7fffffffffffffffull, 0x8000000000000000ull, ~1ull, ~0ull };
	u8 b[3], type;
	u32 index, k;

	for (k = 0; k < n; k++) {
		take(r, b, sizeof(b));
		type = b[0] == 0xff ? VOLATILE_REPORT_REG : b[0] == 0xfe ? IMMEDIATE_REG : types[b[0] % 3];
		if (type == IMPLICIT_REG)
			index = b[1] == 0xff ? US_ELAPSED_REG : (b[1] & 1) ? RATE_REG : CWND_REG;
		else
			index = b[1] == 0xff ? MAX_CONTROL_REG : b[1] % MAX_CONTROL_REG;
		put_update(m, type, index, b[2] >= 0xf0 ? edge64[b[2] - 0xf0] : (u64)b[2] * 1448);
	}
}

/*
 * Byte layout: type (0xff: a new agent), socket id, then
 *   INSTALL: uid, expressions, instructions, report DEFs, flags; 4 bytes per expression (start and
 *            length of the condition and of the body), 7 per instruction (opcode, then type and
 *            index of the result, left and right registers);
 *   UPDATE:  updates; 3 bytes per update (register type, index, value);
 *   CHANGE:  uid, updates; 3 bytes per update.
 * Bytes past the end of the input read as zeros. Returns 1: a message in m; 2: a new agent;
 * 0: the input is used up.
 */
static int read_shaped(struct reader *r, struct msg *m)
{
	struct InstallExpressionMsgHdr ih;
	struct ChangeProgMsg cp;
	struct ExpressionMsg e;
	struct InstructionMsg i;
	u8 type, sid, defs, b[4];
	int report;
	u32 k;

	if (!r->left)
		return 0;
	type = take8(r);
	if (type == 0xff)
		return 2;	/* not a message: a new agent (reannounce_flows()) */
	type = INSTALL_EXPR + type % 3;
	sid = take8(r);
	header(m, type, sid == 0xff ? 0 : sid == 0xfe ? MAX_FLOWS + 1 : 1 + sid % MAX_FLOWS);
	switch (type) {
	case INSTALL_EXPR:
		ih.program_uid = take8(r) % 8;	/* BASE_UID among them; 8 uids for 4 slots */
		ih.num_expressions = shape_count(take8(r), MAX_EXPRESSIONS);
		ih.num_instructions = shape_count(take8(r), CCP_MAX_PROGRAM_INSTRUCTIONS);
		/* this many leading instructions are report-register DEFs (the measurement's size) */
		defs = (u8)shape_count(take8(r), MAX_REPORT_REG);
		/* flag 1: the last instruction reports and expression 0 runs it on every ACK */
		report = (take8(r) & 1) && ih.num_instructions;
		if (report && !ih.num_expressions)
			ih.num_expressions = 1;
		put(m, &ih, sizeof(ih));
		for (k = 0; k < ih.num_expressions; k++) {
			take(r, b, sizeof(b));
			shape_range(b[0], b[1], ih.num_instructions, &e.cond_start_idx, &e.num_cond_instrs);
			shape_range(b[2], b[3], ih.num_instructions, &e.event_start_idx, &e.num_event_instrs);
			if (k == 0 && report) {
				e.cond_start_idx = ih.num_instructions - 1;
				e.num_cond_instrs = 1;
			}
			put(m, &e, sizeof(e));
		}
		for (k = 0; k < ih.num_instructions; k++) {
			shape_instruction(r, &i);
			if (k < defs) {
				i.opcode = DEF;
				i.left_reg_type = (i.left_reg_type & 1) ? VOLATILE_REPORT_REG : NONVOLATILE_REPORT_REG;
				i.left_register %= MAX_REPORT_REG;
			}
			if (report && k == ih.num_instructions - 1)
				i = instr(BIND, IMPLICIT_REG, SHOULD_REPORT_REG, IMPLICIT_REG, SHOULD_REPORT_REG,
					  IMMEDIATE_REG, 1);
			put(m, &i, sizeof(i));
		}
		break;
	case UPDATE_FIELDS:
		k = shape_count(take8(r), MAX_MUTABLE_REG);
		put(m, &k, sizeof(k));
		shape_updates(r, m, k);
		break;
	default:
		cp.program_uid = take8(r) % 8;
		cp.num_updates = shape_count(take8(r), MAX_MUTABLE_REG);
		put(m, &cp, sizeof(cp));
		shape_updates(r, m, cp.num_updates);
		break;
	}
	finish(m);
	return 1;
}

/* One input, the three readings, each on a fresh datapath. */
static void run_input(const uint8_t *data, size_t size)
{
	static struct msg m;
	struct reader r;
	u64 seed = hash_input(data, size);
	int k, got;

	/* 1. the bytes as they come */
	deliver(data, size, seed);
	session_end();

	/* 2. repaired (skipped when that is the raw message again, as for a valid one) */
	r.p = data;
	r.left = size;
	for (k = 0; k < MAX_SEQUENCE && read_repaired(&r, &m); k++) {
		if (k == 0 && m.len == size && !memcmp(m.buf, data, size))
			break;
		deliver(m.buf, m.len, seed + 1);
	}
	session_end();

	/* 3. shaped */
	r.p = data;
	r.left = size;
	for (k = 0; k < MAX_SEQUENCE && (got = read_shaped(&r, &m)); k++) {
		if (got == 1) {
			deliver(m.buf, m.len, seed + 2);
		} else if (session_open) {
			reannounce_flows();
			invoke_all(1);
		}
	}
	session_end();
}

#ifndef FUZZ_SEEDGEN

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_input(data, size);
	return 0;
}

#else /* FUZZ_SEEDGEN: write the seed corpus */

/* Every opcode and register type once: a DEF block, a fall-through arithmetic rule, a report rule. */
static void build_all_ops_program(struct msg *m, u32 uid)
{
	static const struct ExpressionMsg e[2] = {
		{ .cond_start_idx = 4, .num_cond_instrs = 1, .event_start_idx = 5, .num_event_instrs = 14 },
		{ .cond_start_idx = 19, .num_cond_instrs = 1, .event_start_idx = 20, .num_event_instrs = 1 },
	};
	const struct InstructionMsg i[21] = {
		instr(DEF, VOLATILE_REPORT_REG, 0, VOLATILE_REPORT_REG, 0, IMMEDIATE_REG, 0),
		instr(DEF, NONVOLATILE_REPORT_REG, 1, NONVOLATILE_REPORT_REG, 1, IMMEDIATE_REG, 0x3fffffff),
		instr(DEF, VOLATILE_CONTROL_REG, 0, VOLATILE_CONTROL_REG, 0, IMMEDIATE_REG, 10),
		instr(DEF, NONVOLATILE_CONTROL_REG, 1, NONVOLATILE_CONTROL_REG, 1, IMMEDIATE_REG, 14480),
		instr(BIND, IMPLICIT_REG, EXPR_FLAG_REG, IMPLICIT_REG, EXPR_FLAG_REG, IMMEDIATE_REG, 1),
		instr(ADD, TMP_REG, 0, PRIMITIVE_REG, ACK_BYTES_ACKED, IMMEDIATE_REG, 1),
		instr(DIV, TMP_REG, 1, TMP_REG, 0, IMMEDIATE_REG, 2),
		instr(EQUIV, LOCAL_REG, 0, TMP_REG, 1, TMP_REG, 0),
		instr(EWMA, VOLATILE_REPORT_REG, 0, IMMEDIATE_REG, 2, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(GT, TMP_REG, 2, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US, IMMEDIATE_REG, 1000),
		instr(IF, VOLATILE_CONTROL_REG, 0, TMP_REG, 2, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(LT, TMP_REG, 3, IMPLICIT_REG, US_ELAPSED_REG, IMMEDIATE_REG, 100),
		instr(MAX, NONVOLATILE_REPORT_REG, 1, NONVOLATILE_REPORT_REG, 1, PRIMITIVE_REG, FLOW_RATE_OUTGOING),
		instr(MAXWRAP, TMP_REG, 4, PRIMITIVE_REG, ACK_PACKETS_ACKED, IMMEDIATE_REG, 5),
		instr(MIN, LOCAL_REG, 1, TMP_REG, 4, IMMEDIATE_REG, 10),
		instr(MUL, TMP_REG, 5, PRIMITIVE_REG, ACK_PACKETS_ACKED, IMMEDIATE_REG, 1448),
		instr(NOTIF, IMPLICIT_REG, CWND_REG, TMP_REG, 3, NONVOLATILE_CONTROL_REG, 1),
		instr(SUB, TMP_REG, 6, TMP_REG, 0, IMMEDIATE_REG, 1),
		instr(BIND, IMPLICIT_REG, SHOULD_FALLTHROUGH_REG, IMPLICIT_REG, SHOULD_FALLTHROUGH_REG, IMMEDIATE_REG, 1),
		instr(GT, IMPLICIT_REG, EXPR_FLAG_REG, IMPLICIT_REG, US_ELAPSED_REG, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(BIND, IMPLICIT_REG, SHOULD_REPORT_REG, IMPLICIT_REG, SHOULD_REPORT_REG, IMMEDIATE_REG, 1),
	};

	build_program(m, uid, e, 2, i, 21);
}

/* A full measurement: MAX_REPORT_REG report-register DEFs, then a rule that reports. */
static void build_full_report_program(struct msg *m, u32 uid)
{
	static struct InstructionMsg i[MAX_REPORT_REG + 1];
	struct ExpressionMsg e = { .cond_start_idx = MAX_REPORT_REG, .num_cond_instrs = 1,
				   .event_start_idx = MAX_REPORT_REG, .num_event_instrs = 1 };
	u32 k;

	for (k = 0; k < MAX_REPORT_REG; k++)
		i[k] = instr(DEF, (k & 1) ? NONVOLATILE_REPORT_REG : VOLATILE_REPORT_REG, k,
			     (k & 1) ? NONVOLATILE_REPORT_REG : VOLATILE_REPORT_REG, k, IMMEDIATE_REG, k);
	i[MAX_REPORT_REG] = instr(BIND, IMPLICIT_REG, SHOULD_REPORT_REG, IMPLICIT_REG, SHOULD_REPORT_REG,
				  IMMEDIATE_REG, 1);
	build_program(m, uid, &e, 1, i, MAX_REPORT_REG + 1);
}

static void build_update(struct msg *m, u32 sid)
{
	u32 n = 3;

	header(m, UPDATE_FIELDS, sid);
	put(m, &n, sizeof(n));
	put_update(m, IMPLICIT_REG, CWND_REG, 57920);
	put_update(m, IMPLICIT_REG, RATE_REG, 1250000);
	put_update(m, VOLATILE_CONTROL_REG, 0, 20);
	finish(m);
}

static int written;

static void write_seed(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
	written++;
}

/* The repaired reading of `n` well-formed messages one after the other gives them back. */
static void check_repaired(const char *name, const char *buf, size_t len, int n)
{
	static struct msg m;
	struct reader r = { .p = (const uint8_t *)buf, .left = len };
	size_t at = 0;

	while (n--) {
		if (!read_repaired(&r, &m) || memcmp(m.buf, buf + at, m.len)) {
			fprintf(stderr, "fuzz seeds: %s does not read back as itself\n", name);
			exit(1);
		}
		at += m.len;
	}
	if (at != len) {
		fprintf(stderr, "fuzz seeds: %s has trailing bytes\n", name);
		exit(1);
	}
}

/* An agent -> datapath message: valid, and applied by libccp without a sanitizer report. */
static void agent_seed(const char *dir, const char *name, struct msg *m)
{
	enum ccp_invalid why = deliver(m->buf, m->len, 1);

	if (why != CCP_VALID || last_read_ret < 0) {
		fprintf(stderr, "fuzz seeds: %s refused: %s (libccp: %d)\n", name, ccp_validate_reason(why),
			last_read_ret);
		exit(1);
	}
	session_end();
	check_repaired(name, m->buf, m->len, 1);
	write_seed(dir, name, m->buf, m->len);
	run_input((const uint8_t *)m->buf, m->len);
}

/* A datapath -> agent message: the validator refuses its type. */
static void datapath_seed(const char *dir, const char *name, const char *buf, int len)
{
	if (len <= 0 || ccp_validate_msg(buf, len, MAX_FLOWS) != CCP_INVALID_TYPE) {
		fprintf(stderr, "fuzz seeds: %s not refused as a datapath message\n", name);
		exit(1);
	}
	write_seed(dir, name, buf, len);
	run_input((const uint8_t *)buf, len);
}

int main(int argc, char **argv)
{
	static struct msg m, seq;
	struct CreateMsg cr = { .init_cwnd = 14480, .mss = 1448, .src_ip = 0x0a000001, .src_port = 40000,
				.dst_ip = 0x0a000002, .dst_port = 5201, .congAlg = "reno" };
	u64 fields[2] = { 14480, 40000 };
	char buf[REPORT_MSG_SIZE];
	const char *dir;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];

	build_base_program(&m, BASE_UID);
	agent_seed(dir, "install_expr.bin", &m);
	build_all_ops_program(&m, 9);
	agent_seed(dir, "install_expr_all_ops.bin", &m);
	build_full_report_program(&m, 11);
	agent_seed(dir, "install_expr_110_reports.bin", &m);
	build_update(&m, 1);
	agent_seed(dir, "update_fields.bin", &m);
	build_change(&m, 2, BASE_UID, 1);
	agent_seed(dir, "change_prog.bin", &m);

	/* for the repaired reading: install, switch flow 1 to it, update it */
	build_all_ops_program(&m, 9);
	seq.len = 0;
	put(&seq, m.buf, m.len);
	build_change(&m, 1, 9, 2);
	put(&seq, m.buf, m.len);
	build_update(&m, 1);
	put(&seq, m.buf, m.len);
	check_repaired("sequence", seq.buf, seq.len, 3);
	write_seed(dir, "sequence_install_change_update.bin", seq.buf, seq.len);
	run_input((const uint8_t *)seq.buf, seq.len);

	datapath_seed(dir, "create.bin", buf, write_create_msg(buf, sizeof(buf), 1, cr));
	datapath_seed(dir, "measure.bin", buf, write_measure_msg(buf, sizeof(buf), 1, BASE_UID, fields, 2));
	datapath_seed(dir, "ready.bin", buf, write_ready_msg(buf, sizeof(buf), 1));
	printf("fuzz seeds: %d written to %s\n", written, dir);
	return 0;
}

#endif /* FUZZ_SEEDGEN */
