/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Validation of agent -> datapath CCP messages, before libccp sees them.
 *
 * libccp trusts its input (counts checked on a zeroed struct, register indices read without
 * bounds, u8 loop indices over 256-entry tables). Every message that reaches ccp_read_msg()
 * first passes ccp_validate_msg(), which checks the whole message against libccp's own limits.
 * The file has no kernel dependencies so the same code is fuzzed in user space (make test).
 */
#ifndef POLYCC_CCP_VALIDATE_H
#define POLYCC_CCP_VALIDATE_H

#include "types.h"

/* Why a message was refused; ccp_validate_reason() names each for the log. */
enum ccp_invalid {
	CCP_VALID = 0,
	CCP_INVALID_SHORT,		/* shorter than its header or its fixed part */
	CCP_INVALID_LEN,		/* header length disagrees with the payload */
	CCP_INVALID_TOO_LONG,		/* longer than libccp's largest message */
	CCP_INVALID_TYPE,		/* not INSTALL_EXPR, UPDATE_FIELDS or CHANGE_PROG */
	CCP_INVALID_COUNT,		/* too many expressions, instructions or updates */
	CCP_INVALID_EXPR_RANGE,		/* expression points outside the instructions */
	CCP_INVALID_OPCODE,
	CCP_INVALID_REG_TYPE,
	CCP_INVALID_REG_INDEX,
	CCP_INVALID_RESULT_REG,		/* result written to an immediate or a primitive */
	CCP_INVALID_UPDATE_REG,		/* update of a register updates may not touch */
	CCP_INVALID_SOCKET_ID,		/* per-flow message for socket id 0 or above the table */
	CCP_INVALID_REPORT_COUNT,	/* more report-register DEFs than a measurement carries */
	CCP_INVALID_MAX,
};

/* Largest instruction count a program may have: libccp walks instructions with u8 indices. */
#define CCP_MAX_PROGRAM_INSTRUCTIONS 255

enum ccp_invalid ccp_validate_msg(const char *buf, size_t len, u32 max_flows);
/* Number of registers of each type a program may name (2^32 immediates); 0 for an unknown type. */
u64 ccp_reg_limit(u8 type);
const char *ccp_validate_reason(enum ccp_invalid why);

#endif
