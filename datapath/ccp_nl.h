/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Netlink transport between the ccp datapath and its agent: generic netlink (default) or
 * portus 0.9's NETLINK_USERSOCK (module parameter ipc; see ccp_nl.c).
 */
#ifndef POLYCC_CCP_NL_H
#define POLYCC_CCP_NL_H

#include <linux/moduleparam.h>
#include <linux/types.h>

/* usersock mode: portus joins this multicast group on NETLINK_USERSOCK. */
#define CCP_NL_GROUP 22

/* genl mode: the family, its one command and its one attribute (agent/src/transport.rs). */
#define CCP_GENL_NAME "polycc_ccp"
#define CCP_GENL_VERSION 1
enum {
	CCP_GENL_CMD_UNSPEC,
	CCP_GENL_CMD_MSG,	/* one CCP message, either way */
};

enum {
	CCP_GENL_ATTR_UNSPEC,
	CCP_GENL_ATTR_MSG,	/* binary: the CCP message */
	__CCP_GENL_ATTR_MAX,
};

#define CCP_GENL_ATTR_MAX (__CCP_GENL_ATTR_MAX - 1)

struct sock;
/* A validated agent message from port `portid` (socket `sk`), in the sender's context. */
typedef void (*ccp_nl_handler)(u32 portid, struct sock *sk, char *msg, int len);

/* Messages naming socket ids up to `max_flows` are valid; they go to `handler`. */
int ccp_nl_init(u32 max_flows, ccp_nl_handler handler);
void ccp_nl_exit(void);
/* NETLINK_GENERIC or NETLINK_USERSOCK: whose socket releases concern the agent. */
int ccp_nl_protocol(void);
/*
 * Send one CCP message to the agent at port `portid` (genl; usersock multicasts to its group
 * and ignores it): 0, or -ENOTCONN (no transport yet), -ESRCH (no agent), -ENOBUFS, -ENOMEM.
 */
int ccp_nl_send(u32 portid, const char *msg, int len);
/*
 * Queue a message on this CPU's outbox (BHs off until the flush): 0, or -ENOSPC when full.
 * ccp_nl_flush() hands what is queued, in order, to `deliver` for the agent at `portid` and
 * returns how many deliveries failed.
 */
int ccp_nl_queue(const char *msg, int len);
int ccp_nl_flush(u32 portid, int (*deliver)(u32 portid, const char *msg, int len));

#endif
