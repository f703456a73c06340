// SPDX-License-Identifier: GPL-2.0
/*
 * User-space tests of the agent-message validator, with the hardened libccp behind it: the
 * same C the module compiles, built with AddressSanitizer and UBSan.
 *
 * 1. Well-formed INSTALL_EXPR / UPDATE_FIELDS / CHANGE_PROG messages pass and libccp applies them.
 * 2. A corpus of malformed messages (bad lengths, counts, register indices, oversized programs)
 *    is refused, each for the expected reason.
 * 3. Fuzzing: random mutations of the valid messages go through the validator, and whatever it
 *    accepts goes through ccp_read_msg() and ccp_invoke(); the sanitizers turn any memory error
 *    or undefined behaviour into a failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccp.h"
#include "ccp_priv.h"
#include "ccp_validate.h"
#include "ccp_msg.h"
#include "check.h"

#define MAX_FLOWS 4
#define FUZZ_ITERATIONS 200000

/* ---- a user-space libccp datapath ---------------------------------------------------------- */

static u64 fake_now_us;
static u32 last_cwnd, last_rate;
static int messages_out;

static void dp_set_cwnd(struct ccp_connection *conn, u32 cwnd) { (void)conn; last_cwnd = cwnd; }
static void dp_set_rate(struct ccp_connection *conn, u32 rate) { (void)conn; last_rate = rate; }
static int dp_send(struct ccp_datapath *dp, char *msg, int len) { (void)dp; (void)msg; (void)len; messages_out++; return 0; }
static u64 dp_now(void) { return fake_now_us; }
static u64 dp_since(u64 then) { return fake_now_us > then ? fake_now_us - then : 0; }
static u64 dp_after(u64 us) { return fake_now_us + us; }
static void dp_log(struct ccp_datapath *dp, enum ccp_log_level l, const char *m, int n) { (void)dp; (void)l; (void)m; (void)n; }

static struct ccp_datapath dp;
static struct ccp_connection conns[MAX_FLOWS];
static struct ccp_connection *conn;

static void datapath_init(void)
{
	static const struct ccp_datapath callbacks = {
		.set_cwnd = dp_set_cwnd, .set_rate_abs = dp_set_rate, .send_msg = dp_send,
		.log = dp_log, .now = dp_now, .since_usecs = dp_since, .after_usecs = dp_after,
	};

	if (test_datapath_init(&dp, &callbacks, conns, MAX_FLOWS, 4) < 0) {
		fprintf(stderr, "ccp_init failed\n");
		exit(2);
	}
	conn = ccp_connection_start(&dp, NULL, (struct ccp_datapath_info *)&test_flow_info);
	if (!conn) {
		fprintf(stderr, "ccp_connection_start failed\n");
		exit(2);
	}
}

/* ---- message builders ------------------------------------------------------------------------ */

/* struct msg, put, header, finish, instr, put_update: ccp_msg.h */

/*
 * A small valid program: report register 0 accumulates Ack.bytes_acked, register 1 holds the
 * last RTT; report when Micros exceeds the RTT sample.
 *   (def (Report (volatile acked 0) (rtt 0)))
 *   (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (:= Report.rtt Flow.rtt_sample_us)
 *         (fallthrough))
 *   (when (> Micros Flow.rtt_sample_us) (report))
 */
static void build_install(struct msg *m, u32 uid)
{
	struct InstallExpressionMsgHdr h = { .program_uid = uid, .num_expressions = 2, .num_instructions = 8 };
	struct ExpressionMsg e[2] = {
		{ .cond_start_idx = 2, .num_cond_instrs = 1, .event_start_idx = 3, .num_event_instrs = 3 },
		{ .cond_start_idx = 6, .num_cond_instrs = 1, .event_start_idx = 7, .num_event_instrs = 1 },
	};
	struct InstructionMsg i[8] = {
		instr(DEF, VOLATILE_REPORT_REG, 0, VOLATILE_REPORT_REG, 0, IMMEDIATE_REG, 0),
		instr(DEF, NONVOLATILE_REPORT_REG, 1, NONVOLATILE_REPORT_REG, 1, IMMEDIATE_REG, 0),
		instr(BIND, IMPLICIT_REG, EXPR_FLAG_REG, IMPLICIT_REG, EXPR_FLAG_REG, IMMEDIATE_REG, 1),
		instr(ADD, VOLATILE_REPORT_REG, 0, VOLATILE_REPORT_REG, 0, PRIMITIVE_REG, ACK_BYTES_ACKED),
		instr(BIND, NONVOLATILE_REPORT_REG, 1, NONVOLATILE_REPORT_REG, 1, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(BIND, IMPLICIT_REG, SHOULD_FALLTHROUGH_REG, IMPLICIT_REG, SHOULD_FALLTHROUGH_REG, IMMEDIATE_REG, 1),
		instr(GT, IMPLICIT_REG, EXPR_FLAG_REG, IMPLICIT_REG, US_ELAPSED_REG, PRIMITIVE_REG, FLOW_RTT_SAMPLE_US),
		instr(BIND, IMPLICIT_REG, SHOULD_REPORT_REG, IMPLICIT_REG, SHOULD_REPORT_REG, IMMEDIATE_REG, 1),
	};

	header(m, INSTALL_EXPR, 0);
	put(m, &h, sizeof(h));
	put(m, e, sizeof(e));
	put(m, i, sizeof(i));
	finish(m);
}

/*
 * Issue 16, K1: an INSTALL whose leading DEFs name `defs` report registers (indices reused: every
 * index stays in range). libccp reports one field per such DEF, into a 110-field stack array.
 */
static void build_install_defs(struct msg *m, u32 defs)
{
	struct InstallExpressionMsgHdr h = { .program_uid = 3, .num_expressions = 1, .num_instructions = defs + 1 };
	struct ExpressionMsg e = { .cond_start_idx = defs, .num_cond_instrs = 1, .event_start_idx = defs,
				   .num_event_instrs = 1 };
	u32 k;

	header(m, INSTALL_EXPR, 0);
	put(m, &h, sizeof(h));
	put(m, &e, sizeof(e));
	for (k = 0; k < defs; k++) {
		struct InstructionMsg d = instr(DEF, VOLATILE_REPORT_REG, k % MAX_REPORT_REG,
						VOLATILE_REPORT_REG, k % MAX_REPORT_REG, IMMEDIATE_REG, 0);

		put(m, &d, sizeof(d));
	}
	{
		struct InstructionMsg b = instr(BIND, IMPLICIT_REG, SHOULD_REPORT_REG, IMPLICIT_REG,
						SHOULD_REPORT_REG, IMMEDIATE_REG, 1);

		put(m, &b, sizeof(b));
	}
	finish(m);
}

static void build_update(struct msg *m, u32 sid, u32 cwnd, u32 rate)
{
	u32 n = 2;

	header(m, UPDATE_FIELDS, sid);
	put(m, &n, sizeof(n));
	put_update(m, IMPLICIT_REG, CWND_REG, cwnd);
	put_update(m, IMPLICIT_REG, RATE_REG, rate);
	finish(m);
}

static void build_change(struct msg *m, u32 sid, u32 uid)
{
	struct ChangeProgMsg c = { .program_uid = uid, .num_updates = 1 };

	header(m, CHANGE_PROG, sid);
	put(m, &c, sizeof(c));
	put_update(m, IMPLICIT_REG, CWND_REG, 28960);
	finish(m);
}

/* ---- 1. well-formed messages pass and work ----------------------------------------------- */

static void test_valid_messages_are_applied(void)
{
	struct msg m;
	int ret;

	datapath_init();
	build_install(&m, 7);
	check(ccp_validate_msg(m.buf, m.len, MAX_FLOWS) == CCP_VALID, "install: %s",
	      ccp_validate_reason(ccp_validate_msg(m.buf, m.len, MAX_FLOWS)));
	check(ccp_read_msg(&dp, m.buf, (int)m.len) == LIBCCP_OK, "install applied");

	build_change(&m, conn->index, 7);
	check(ccp_validate_msg(m.buf, m.len, MAX_FLOWS) == CCP_VALID, "change_prog valid");
	ret = ccp_read_msg(&dp, m.buf, (int)m.len);
	check(ret >= 0, "change_prog applied (%d)", ret);

	conn->prims.bytes_acked = 1448;
	conn->prims.rtt_sample_us = 40000;
	last_cwnd = 0;
	fake_now_us += 1000;
	ccp_invoke(conn);
	check(last_cwnd == 28960, "CHANGE_PROG's cwnd reaches set_cwnd (got %u)", last_cwnd);

	build_update(&m, conn->index, 57920, 1250000);
	check(ccp_validate_msg(m.buf, m.len, MAX_FLOWS) == CCP_VALID, "update valid");
	check(ccp_read_msg(&dp, m.buf, (int)m.len) >= 0, "update applied");
	messages_out = 0;
	fake_now_us += 50000; /* past the RTT: the program reports */
	ccp_invoke(conn);
	check(last_cwnd == 57920 && last_rate == 1250000, "UPDATE_FIELDS applied (cwnd %u rate %u)",
	      last_cwnd, last_rate);
	check(messages_out == 1, "the program reported once past one RTT (%d messages)", messages_out);
	ccp_connection_free(&dp, conn->index);
	ccp_free(&dp);
}

/* ---- 2. a corpus of malformed messages --------------------------------------------------- */

static void expect(const struct msg *m, enum ccp_invalid why, const char *name)
{
	enum ccp_invalid got = ccp_validate_msg(m->buf, m->len, MAX_FLOWS);

	check(got == why, "%s: expected \"%s\", got \"%s\"", name, ccp_validate_reason(why),
	      ccp_validate_reason(got));
}

/* Rewrite the u32 at byte `off` of a built message. */
static void poke32(struct msg *m, size_t off, u32 v)
{
	memcpy(m->buf + off, &v, sizeof(v));
}

static void test_malformed_corpus_is_refused(void)
{
	const size_t body = sizeof(struct CcpMsgHeader);
	const size_t exprs = body + sizeof(struct InstallExpressionMsgHdr);
	const size_t instrs = exprs + 2 * sizeof(struct ExpressionMsg);
	struct msg m;
	u32 n;

	m.len = 4;
	memset(m.buf, 0, 8);
	expect(&m, CCP_INVALID_SHORT, "4-byte message");

	build_install(&m, 1);
	m.len -= 1;
	expect(&m, CCP_INVALID_LEN, "install truncated by one byte");

	build_install(&m, 1);
	m.buf[m.len++] = 0;
	expect(&m, CCP_INVALID_LEN, "install with a trailing byte (header length unchanged)");
	finish(&m);
	expect(&m, CCP_INVALID_LEN, "install with a trailing byte (header length updated)");

	build_install(&m, 1);
	m.len = BIGGEST_MSG_SIZE + 1;
	expect(&m, CCP_INVALID_TOO_LONG, "longer than libccp's largest message");

	build_install(&m, 1);
	memset(m.buf, 0, 2); /* type CREATE */
	expect(&m, CCP_INVALID_TYPE, "CREATE sent to the datapath");
	m.buf[0] = 42;
	expect(&m, CCP_INVALID_TYPE, "unknown type 42");

	build_install(&m, 1);
	poke32(&m, body + offsetof(struct InstallExpressionMsgHdr, num_expressions), MAX_EXPRESSIONS + 1);
	expect(&m, CCP_INVALID_COUNT, "257 expressions");
	build_install(&m, 1);
	poke32(&m, body + offsetof(struct InstallExpressionMsgHdr, num_instructions), 256);
	expect(&m, CCP_INVALID_COUNT, "256 instructions (u8 loop in libccp)");
	build_install(&m, 1);
	poke32(&m, body + offsetof(struct InstallExpressionMsgHdr, num_instructions), 0xffffffffu);
	expect(&m, CCP_INVALID_COUNT, "2^32-1 instructions");

	build_install(&m, 1);
	poke32(&m, exprs + offsetof(struct ExpressionMsg, event_start_idx), 7);
	expect(&m, CCP_INVALID_EXPR_RANGE, "expression body past the last instruction");
	build_install(&m, 1);
	poke32(&m, exprs + offsetof(struct ExpressionMsg, cond_start_idx), 0xffffffffu);
	expect(&m, CCP_INVALID_EXPR_RANGE, "expression start that wraps around");

	build_install(&m, 1);
	m.buf[instrs] = MAX_OP;
	expect(&m, CCP_INVALID_OPCODE, "opcode 15");
	build_install(&m, 1);
	m.buf[instrs + offsetof(struct InstructionMsg, left_reg_type)] = 9;
	expect(&m, CCP_INVALID_REG_TYPE, "register type 9");
	build_install(&m, 1);
	poke32(&m, instrs + offsetof(struct InstructionMsg, result_register), MAX_REPORT_REG);
	expect(&m, CCP_INVALID_REG_INDEX, "report register 110");
	build_install(&m, 1);
	m.buf[instrs + 3 * sizeof(struct InstructionMsg) + offsetof(struct InstructionMsg, right_reg_type)] = TMP_REG;
	poke32(&m, instrs + 3 * sizeof(struct InstructionMsg) + offsetof(struct InstructionMsg, right_register), MAX_TMP_REG);
	expect(&m, CCP_INVALID_REG_INDEX, "tmp register 8 (libccp has 8)");
	build_install(&m, 1);
	poke32(&m, instrs + 3 * sizeof(struct InstructionMsg) + offsetof(struct InstructionMsg, right_register), FLOW_WAS_TIMEOUT + 1);
	expect(&m, CCP_INVALID_REG_INDEX, "primitive 15");
	build_install(&m, 1);
	m.buf[instrs + offsetof(struct InstructionMsg, result_reg_type)] = IMMEDIATE_REG;
	expect(&m, CCP_INVALID_RESULT_REG, "result into an immediate");

	build_install_defs(&m, MAX_REPORT_REG);
	expect(&m, CCP_VALID, "110 report registers (a full measurement)");
	build_install_defs(&m, MAX_REPORT_REG + 1);
	expect(&m, CCP_INVALID_REPORT_COUNT, "111 report-register DEFs (stack overflow in the measurement writer)");
	build_install_defs(&m, 254);
	expect(&m, CCP_INVALID_REPORT_COUNT, "254 report-register DEFs");

	build_update(&m, 1, 1000, 1000);
	poke32(&m, body, MAX_MUTABLE_REG + 1);
	expect(&m, CCP_INVALID_COUNT, "223 updates");
	build_update(&m, 1, 1000, 1000);
	poke32(&m, body, 256 + 2); /* libccp reads only the low byte: 2 */
	expect(&m, CCP_INVALID_COUNT, "258 updates whose low byte is 2");
	build_update(&m, 1, 1000, 1000);
	poke32(&m, body, 3);
	expect(&m, CCP_INVALID_LEN, "3 updates announced, 2 present");
	build_update(&m, 1, 1000, 1000);
	m.buf[body + sizeof(u32)] = NONVOLATILE_CONTROL_REG;
	poke32(&m, body + sizeof(u32) + offsetof(struct UpdateField, reg_index), MAX_CONTROL_REG);
	expect(&m, CCP_INVALID_REG_INDEX, "control register 110");
	build_update(&m, 1, 1000, 1000);
	poke32(&m, body + sizeof(u32) + offsetof(struct UpdateField, reg_index), US_ELAPSED_REG);
	expect(&m, CCP_INVALID_UPDATE_REG, "update of Micros");
	build_update(&m, 1, 1000, 1000);
	m.buf[body + sizeof(u32)] = VOLATILE_REPORT_REG;
	expect(&m, CCP_INVALID_UPDATE_REG, "update of a report register");
	build_update(&m, 0, 1000, 1000);
	expect(&m, CCP_INVALID_SOCKET_ID, "socket id 0");
	build_update(&m, MAX_FLOWS + 1, 1000, 1000);
	expect(&m, CCP_INVALID_SOCKET_ID, "socket id above the table");

	build_change(&m, 1, 1);
	n = 2;
	poke32(&m, body + offsetof(struct ChangeProgMsg, num_updates), n);
	expect(&m, CCP_INVALID_LEN, "change_prog announcing 2 updates with 1");
	build_change(&m, 1, 1);
	m.len = body + 4;
	finish(&m);
	expect(&m, CCP_INVALID_SHORT, "change_prog without its fixed part");
}

/* ---- 3. fuzzing -------------------------------------------------------------------------------- */

static u64 rng_state = 0x9e3779b97f4a7c15ull;

static u64 next_random(void)
{
	u64 z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void mutate(struct msg *m)
{
	int edits = 1 + (int)(next_random() % 4);

	while (edits--) {
		u64 r = next_random();

		switch (r % 6) {
		case 0: /* flip a bit */
			if (m->len)
				m->buf[(r >> 8) % m->len] ^= (char)(1u << ((r >> 40) % 8));
			break;
		case 1: /* random byte */
			if (m->len)
				m->buf[(r >> 8) % m->len] = (char)(r >> 32);
			break;
		case 2: /* truncate */
			m->len = (r >> 8) % (m->len + 1);
			break;
		case 3: /* extend with garbage, keep the header length consistent half the time */
			if (m->len + 16 < sizeof(m->buf)) {
				memcpy(m->buf + m->len, &r, 8);
				m->len += 1 + (r >> 8) % 8;
				if (r & (1ull << 50))
					finish(m);
			}
			break;
		case 4: /* a random u32 count or index somewhere */
			if (m->len >= 4)
				poke32(m, (r >> 8) % (m->len - 3), (u32)(r >> 32) % 512);
			break;
		default: /* re-sync the header length */
			finish(m);
			break;
		}
	}
}

static void test_fuzzed_messages_never_break_libccp(void)
{
	struct msg base[3], m;
	long accepted = 0, i;

	datapath_init();
	build_install(&base[0], 3);
	build_update(&base[1], conn->index, 10 * 1448, 0);
	build_change(&base[2], conn->index, 3);
	ccp_read_msg(&dp, base[0].buf, (int)base[0].len);
	for (i = 0; i < FUZZ_ITERATIONS; i++) {
		m = base[i % 3];
		mutate(&m);
		if (ccp_validate_msg(m.buf, m.len, MAX_FLOWS) != CCP_VALID)
			continue;
		accepted++;
		ccp_read_msg(&dp, m.buf, (int)m.len);
		conn->prims.bytes_acked = (u32)next_random();
		conn->prims.rtt_sample_us = next_random() % 200000;
		fake_now_us += next_random() % 20000;
		ccp_invoke(conn);
	}
	check(accepted > 1000, "fuzzing exercised libccp (%ld mutated messages accepted)", accepted);
	printf("fuzz: %d iterations, %ld accepted and executed without sanitizer errors\n",
	       FUZZ_ITERATIONS, accepted);
	ccp_connection_free(&dp, conn->index);
	ccp_free(&dp);
}

int main(void)
{
	test_valid_messages_are_applied();
	test_malformed_corpus_is_refused();
	test_fuzzed_messages_never_break_libccp();
	printf("datapath: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
