// SPDX-License-Identifier: GPL-2.0
/*
 * Netlink transport, as portus 0.9 speaks it: protocol NETLINK_USERSOCK in init_net; the agent
 * sends to port 0 (this kernel socket) with a 16-byte nlmsghdr in front of each CCP message;
 * the datapath multicasts to group 22, one CCP message per netlink message.
 *
 * The input path trusts nothing: the sender needs CAP_NET_ADMIN (NETLINK_USERSOCK lets any
 * user send), the netlink and CCP lengths must agree, and ccp_validate_msg() checks the whole
 * CCP message against libccp's limits before libccp reads it.
 */
#include <linux/netlink.h>
#include <linux/skbuff.h>
#include <linux/capability.h>
#include <linux/moduleparam.h>
#include <net/net_namespace.h>
#include <net/netlink.h>
#include <net/sock.h>

#include "ccp_nl.h"
#include "ccp_stats.h"
#include "ccp_validate.h"

static struct sock *ccp_nl_sock;

/* Read-only counters in /sys/module/<module>/parameters/: logs are ratelimited, these are not. */
static atomic_t refused_messages = ATOMIC_INIT(0);
static atomic_t refused_unprivileged = ATOMIC_INIT(0);

module_param_cb(refused_messages, &ccp_atomic_ops, &refused_messages, 0400);
MODULE_PARM_DESC(refused_messages, "(read-only) malformed agent messages refused since load");
module_param_cb(refused_unprivileged, &ccp_atomic_ops, &refused_unprivileged, 0400);
MODULE_PARM_DESC(refused_unprivileged, "(read-only) messages refused for lacking CAP_NET_ADMIN");

static void ccp_nl_message(u32 portid, struct sock *sk, const struct nlmsghdr *nlh)
{
	enum ccp_invalid why;
	char *msg = nlmsg_data(nlh);
	int len = nlmsg_len(nlh), ret;

	why = ccp_validate_msg(msg, len, ccp_max_flows());
	if (why != CCP_VALID) {
		atomic_inc(&refused_messages);
		pr_warn_ratelimited("ccp: refused an agent message (%d bytes): %s\n", len,
				    ccp_validate_reason(why));
		return;
	}
	ret = ccp_handle_agent_msg(portid, sk, msg, len);
	if (ret < 0 && ccp_log_level() >= 2)
		pr_info_ratelimited("ccp: libccp could not apply an agent message: %d\n", ret);
}

/* Every netlink message of the datagram, in order (issue 16, K9: only the first was read). */
static void ccp_nl_input(struct sk_buff *skb)
{
	const struct nlmsghdr *nlh;
	u32 msglen;

	if (!netlink_capable(skb, CAP_NET_ADMIN)) {
		atomic_inc(&refused_unprivileged);
		pr_warn_ratelimited("ccp: refused a message from port %u without CAP_NET_ADMIN\n",
				    NETLINK_CB(skb).portid);
		return;
	}
	while (skb->len > 0) {
		if (skb->len < NLMSG_HDRLEN) {
			atomic_inc(&refused_messages);
			pr_warn_ratelimited("ccp: refused a netlink message shorter than its header\n");
			return;
		}
		nlh = nlmsg_hdr(skb);
		if (nlh->nlmsg_len < NLMSG_HDRLEN || nlh->nlmsg_len > skb->len) {
			atomic_inc(&refused_messages);
			pr_warn_ratelimited("ccp: refused a netlink message with length %u (buffer %u)\n",
					    nlh->nlmsg_len, skb->len);
			return;
		}
		ccp_nl_message(NETLINK_CB(skb).portid, NETLINK_CB(skb).sk, nlh);
		msglen = min_t(u32, NLMSG_ALIGN(nlh->nlmsg_len), skb->len);
		skb_pull(skb, msglen);
	}
}

int ccp_nl_send(const char *msg, int len)
{
	struct nlmsghdr *nlh;
	struct sk_buff *skb;

	if (!ccp_nl_sock)
		return -ENOTCONN;
	if (len <= 0)
		return -EINVAL;
	skb = nlmsg_new(len, GFP_ATOMIC);
	if (!skb)
		return -ENOMEM;
	nlh = nlmsg_put(skb, 0, 0, NLMSG_DONE, len, 0);
	if (!nlh) {
		kfree_skb(skb);
		return -EMSGSIZE;
	}
	memcpy(nlmsg_data(nlh), msg, len);
	/* Consumes skb; -ESRCH when no agent listens, -ENOBUFS when its buffer is full. */
	return nlmsg_multicast(ccp_nl_sock, skb, 0, CCP_NL_GROUP, GFP_ATOMIC);
}

int ccp_nl_init(void)
{
	struct netlink_kernel_cfg cfg = {
		.input = ccp_nl_input,
	};

	ccp_nl_sock = netlink_kernel_create(&init_net, NETLINK_USERSOCK, &cfg);
	if (!ccp_nl_sock) {
		pr_err("ccp: cannot create the netlink socket\n");
		return -ENOMEM;
	}
	return 0;
}

void ccp_nl_exit(void)
{
	if (ccp_nl_sock) {
		netlink_kernel_release(ccp_nl_sock);
		ccp_nl_sock = NULL;
	}
}
