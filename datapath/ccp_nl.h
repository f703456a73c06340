/* SPDX-License-Identifier: GPL-2.0 */
/* Netlink transport between the ccp datapath and the polycc-portus agent (portus 0.9 wire). */
#ifndef POLYCC_CCP_NL_H
#define POLYCC_CCP_NL_H

#include <linux/moduleparam.h>
#include <linux/types.h>

/* portus joins this multicast group on NETLINK_USERSOCK and reads what the datapath sends. */
#define CCP_NL_GROUP 22

int ccp_nl_init(void);
void ccp_nl_exit(void);
/* Send one CCP message to the agent; 0, or -ESRCH (no agent), -ENOBUFS, -ENOMEM. */
int ccp_nl_send(const char *msg, int len);

struct sock;
/* Implemented in ccp_main.c: hand a validated agent message (from socket `sk`) to libccp. */
int ccp_handle_agent_msg(u32 portid, struct sock *sk, char *msg, int len);
u32 ccp_max_flows(void);
unsigned int ccp_log_level(void);

#endif
