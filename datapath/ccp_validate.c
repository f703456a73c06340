// SPDX-License-Identifier: GPL-2.0
/*
 * Validation of agent -> datapath CCP messages (see ccp_validate.h).
 *
 * Wire format (little-endian, packed; libccp serialize.h):
 *   header   {u16 type, u16 len (with header), u32 socket id}
 *   INSTALL  {u32 program_uid, u32 num_expressions, u32 num_instructions}
 *            ExpressionMsg[num_expressions] InstructionMsg[num_instructions]
 *   UPDATE   {u32 num_updates} UpdateField[num_updates]
 *   CHANGE   {u32 program_uid, u32 num_updates} UpdateField[num_updates]
 * Lengths must match exactly: trailing bytes are refused too.
 */
#ifdef __KERNEL__
#include <linux/kernel.h>
#include <linux/string.h>
#else
#include <stddef.h>
#include <string.h>
#endif

#include "ccp_priv.h"
#include "ccp_validate.h"

static const char *const reasons[CCP_INVALID_MAX] = {
	[CCP_VALID] = "valid",
	[CCP_INVALID_SHORT] = "message too short",
	[CCP_INVALID_LEN] = "header length disagrees with payload",
	[CCP_INVALID_TOO_LONG] = "message too long",
	[CCP_INVALID_TYPE] = "unexpected message type",
	[CCP_INVALID_COUNT] = "too many expressions, instructions or updates",
	[CCP_INVALID_EXPR_RANGE] = "expression outside the program's instructions",
	[CCP_INVALID_OPCODE] = "unknown opcode",
	[CCP_INVALID_REG_TYPE] = "unknown register type",
	[CCP_INVALID_REG_INDEX] = "register index out of range",
	[CCP_INVALID_RESULT_REG] = "result register is an immediate or a primitive",
	[CCP_INVALID_UPDATE_REG] = "update of a register that cannot be updated",
	[CCP_INVALID_SOCKET_ID] = "socket id outside the flow table",
	[CCP_INVALID_REPORT_COUNT] = "more report registers than a measurement carries",
};

const char *ccp_validate_reason(enum ccp_invalid why)
{
	if (why < 0 || why >= CCP_INVALID_MAX)
		return "unknown";
	return reasons[why];
}

static u32 get_u32(const char *p)
{
	u32 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

u64 ccp_reg_limit(u8 type)
{
	switch (type) {
	case IMMEDIATE_REG:
		return (u64)1 << 32;	/* any u32 value */
	case NONVOLATILE_CONTROL_REG:
	case VOLATILE_CONTROL_REG:
		return MAX_CONTROL_REG;
	case IMPLICIT_REG:
		return MAX_IMPLICIT_REG;
	case PRIMITIVE_REG:
		return FLOW_WAS_TIMEOUT + 1;
	case VOLATILE_REPORT_REG:
	case NONVOLATILE_REPORT_REG:
		return MAX_REPORT_REG;
	case TMP_REG:
		return MAX_TMP_REG;
	case LOCAL_REG:
		return MAX_LOCAL_REG;
	default:
		return 0;
	}
}

static enum ccp_invalid check_reg(u8 type, u32 index)
{
	u64 limit = ccp_reg_limit(type);

	if (!limit)
		return CCP_INVALID_REG_TYPE;
	if ((u64)index >= limit)
		return CCP_INVALID_REG_INDEX;
	return CCP_VALID;
}

static enum ccp_invalid check_install(const char *body, size_t len)
{
	const size_t fixed = sizeof(struct InstallExpressionMsgHdr);
	u32 n_expr, n_instr, i, n_report;
	enum ccp_invalid why;
	bool in_defs;

	if (len < fixed)
		return CCP_INVALID_SHORT;
	n_expr = get_u32(body + offsetof(struct InstallExpressionMsgHdr, num_expressions));
	n_instr = get_u32(body + offsetof(struct InstallExpressionMsgHdr, num_instructions));
	if (n_expr > MAX_EXPRESSIONS || n_instr > CCP_MAX_PROGRAM_INSTRUCTIONS)
		return CCP_INVALID_COUNT;
	if (len != fixed + (size_t)n_expr * sizeof(struct ExpressionMsg) +
		   (size_t)n_instr * sizeof(struct InstructionMsg))
		return CCP_INVALID_LEN;

	body += fixed;
	for (i = 0; i < n_expr; i++, body += sizeof(struct ExpressionMsg)) {
		struct ExpressionMsg e;

		memcpy(&e, body, sizeof(e));
		/* u64 sums: a start near U32_MAX must not wrap into range. */
		if ((u64)e.cond_start_idx + e.num_cond_instrs > n_instr ||
		    (u64)e.event_start_idx + e.num_event_instrs > n_instr)
			return CCP_INVALID_EXPR_RANGE;
	}
	n_report = 0;
	in_defs = true;
	for (i = 0; i < n_instr; i++, body += sizeof(struct InstructionMsg)) {
		struct InstructionMsg m;

		memcpy(&m, body, sizeof(m));
		if (m.opcode >= MAX_OP)
			return CCP_INVALID_OPCODE;
		/*
		 * libccp (reset_state) reports one field per report-register DEF of the leading DEF
		 * block, into a MeasureMsg of MAX_REPORT_REG fields on the stack: bound the count.
		 */
		in_defs = in_defs && m.opcode == DEF;
		if (in_defs && (m.left_reg_type == VOLATILE_REPORT_REG ||
				m.left_reg_type == NONVOLATILE_REPORT_REG) &&
		    ++n_report > MAX_REPORT_REG)
			return CCP_INVALID_REPORT_COUNT;
		if (m.result_reg_type == IMMEDIATE_REG || m.result_reg_type == PRIMITIVE_REG)
			return CCP_INVALID_RESULT_REG;
		why = check_reg(m.result_reg_type, m.result_register);
		if (why == CCP_VALID)
			why = check_reg(m.left_reg_type, m.left_register);
		if (why == CCP_VALID)
			why = check_reg(m.right_reg_type, m.right_register);
		if (why != CCP_VALID)
			return why;
	}
	return CCP_VALID;
}

static enum ccp_invalid check_updates(const char *p, size_t len, u32 n)
{
	u32 i;

	if (n > MAX_MUTABLE_REG)
		return CCP_INVALID_COUNT;
	if (len != (size_t)n * sizeof(struct UpdateField))
		return CCP_INVALID_LEN;
	for (i = 0; i < n; i++, p += sizeof(struct UpdateField)) {
		struct UpdateField u;

		memcpy(&u, p, sizeof(u));
		switch (u.reg_type) {
		case NONVOLATILE_CONTROL_REG:
		case VOLATILE_CONTROL_REG:
			if (u.reg_index >= MAX_CONTROL_REG)
				return CCP_INVALID_REG_INDEX;
			break;
		case IMPLICIT_REG:
			if (u.reg_index != CWND_REG && u.reg_index != RATE_REG)
				return CCP_INVALID_UPDATE_REG;
			break;
		default:
			return CCP_INVALID_UPDATE_REG;
		}
	}
	return CCP_VALID;
}

enum ccp_invalid ccp_validate_msg(const char *buf, size_t len, u32 max_flows)
{
	struct CcpMsgHeader hdr;
	const char *body;
	size_t body_len;

	if (!buf || len < sizeof(hdr))
		return CCP_INVALID_SHORT;
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.Len > BIGGEST_MSG_SIZE || len > BIGGEST_MSG_SIZE)
		return CCP_INVALID_TOO_LONG;
	if (hdr.Len != len)
		return CCP_INVALID_LEN;
	body = buf + sizeof(hdr);
	body_len = len - sizeof(hdr);

	switch (hdr.Type) {
	case INSTALL_EXPR:
		return check_install(body, body_len);
	case UPDATE_FIELDS:
		if (hdr.SocketId == 0 || hdr.SocketId > max_flows)
			return CCP_INVALID_SOCKET_ID;
		if (body_len < sizeof(u32))
			return CCP_INVALID_SHORT;
		return check_updates(body + sizeof(u32), body_len - sizeof(u32), get_u32(body));
	case CHANGE_PROG:
		if (hdr.SocketId == 0 || hdr.SocketId > max_flows)
			return CCP_INVALID_SOCKET_ID;
		if (body_len < sizeof(struct ChangeProgMsg))
			return CCP_INVALID_SHORT;
		return check_updates(body + sizeof(struct ChangeProgMsg),
				     body_len - sizeof(struct ChangeProgMsg),
				     get_u32(body + offsetof(struct ChangeProgMsg, num_updates)));
	default:
		return CCP_INVALID_TYPE;
	}
}
