/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Builders for CCP wire messages (agent -> datapath) and a user-space libccp datapath, shared by
 * the validator's test (validate_test.c) and its fuzzer (fuzz_validate.c). Include after
 * libccp's ccp.h/ccp_priv.h.
 */
#ifndef POLYCC_TESTS_CCP_MSG_H
#define POLYCC_TESTS_CCP_MSG_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct msg {
	char buf[BIGGEST_MSG_SIZE + 64];
	size_t len;
};

static inline void put(struct msg *m, const void *p, size_t n)
{
	if (m->len + n > sizeof(m->buf)) {
		fprintf(stderr, "ccp_msg.h: a test built a message past its %zu-byte buffer\n",
			sizeof(m->buf));
		abort();
	}
	memcpy(m->buf + m->len, p, n);
	m->len += n;
}

static inline void header(struct msg *m, u16 type, u32 sid)
{
	struct CcpMsgHeader h = { .Type = type, .Len = 0, .SocketId = sid };

	m->len = 0;
	put(m, &h, sizeof(h));
}

/* Write the message's length into its header. */
static inline void finish(struct msg *m)
{
	u16 len = (u16)m->len;

	memcpy(m->buf + offsetof(struct CcpMsgHeader, Len), &len, sizeof(len));
}

static inline struct InstructionMsg instr(u8 op, u8 rt, u32 r, u8 lt, u32 l, u8 gt, u32 g)
{
	struct InstructionMsg i = {
		.opcode = op, .result_reg_type = rt, .result_register = r,
		.left_reg_type = lt, .left_register = l, .right_reg_type = gt, .right_register = g,
	};
	return i;
}

static inline void put_update(struct msg *m, u8 type, u32 index, u64 value)
{
	struct UpdateField u = { .reg_type = type, .reg_index = index, .new_value = value };

	put(m, &u, sizeof(u));
}

/*
 * A user-space libccp datapath over `conns` (n flows, `programs` program slots), with the
 * callbacks of `cb` and a 1 s fallback timeout; ccp_init()'s result.
 */
static inline int test_datapath_init(struct ccp_datapath *dp, const struct ccp_datapath *cb,
				     struct ccp_connection *conns, size_t n, size_t programs)
{
	*dp = *cb;
	memset(conns, 0, n * sizeof(*conns));
	dp->max_connections = n;
	dp->ccp_active_connections = conns;
	dp->fto_us = 1000000;
	dp->max_programs = programs;
	return ccp_init(dp, 1);
}

/* What the module tells libccp of a new flow, as far as the tests care: a 10-packet window. */
static const struct ccp_datapath_info test_flow_info = {
	.init_cwnd = 14480, .mss = 1448, .congAlg = "ccp",
};

#endif
