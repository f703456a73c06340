/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent as ccp.ko sees it (ccp_agent.c): which netlink socket it is, whether it is alive,
 * and what it sends.
 */
#ifndef POLYCC_CCP_AGENT_H
#define POLYCC_CCP_AGENT_H

#include <linux/types.h>

/* Start watching for agents (netlink releases, the liveness tick): 0 or an error. */
int ccp_agent_start(void);
/* Stop, and let go of the agent's socket. */
void ccp_agent_stop(void);
/* No agent is known, or the known one hangs: its flows fall back. No lock: for the ACK path. */
bool ccp_agent_silent(void);

#endif
