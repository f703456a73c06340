// SPDX-License-Identifier: GPL-2.0
/*
 * Netlink transport between ccp.ko and its agent, in one of two modes (module parameter ipc):
 *
 * genl (default): generic netlink family "polycc_ccp". Its one operation carries one CCP
 *   message in attribute CCP_GENL_ATTR_MSG and is admin-only (GENL_ADMIN_PERM: the kernel
 *   answers EPERM to a sender without CAP_NET_ADMIN before this module sees anything). The
 *   module unicasts to the registered agent's port alone; the family has no multicast group,
 *   and an unprivileged process may not address another's port on NETLINK_GENERIC, so no
 *   local user can reach the agent or forge its messages (issue 16, K5). The agent speaks
 *   first (its program INSTALL): a datapath cannot announce itself to nobody. A request
 *   without the attribute is a no-op, which an agent acknowledges to learn at start whether
 *   it has the permission.
 *
 * usersock: NETLINK_USERSOCK as portus 0.9 speaks it, for unmodified portus-based
 *   algorithms: the agent sends to port 0 with a 16-byte nlmsghdr in front of each CCP
 *   message; the module multicasts to group 22, one CCP message per netlink message. Any
 *   user may send into that group and to the agent's port: the agent must drop what the
 *   kernel did not send (polycc-portus does), and input from a sender without CAP_NET_ADMIN
 *   is refused and counted here.
 *
 * In both modes the input path trusts nothing: the lengths must agree, and ccp_validate_msg()
 * checks the whole CCP message against libccp's limits before libccp reads it.
 */
#include <linux/netlink.h>
#include <linux/skbuff.h>
#include <linux/capability.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/string.h>
#include <net/genetlink.h>
#include <net/net_namespace.h>
#include <net/netlink.h>
#include <net/sock.h>

#include "ccp_nl.h"
#include "ccp_stats.h"
#include "ccp_validate.h"

/* libccp's largest message (serialize.h BIGGEST_MSG_SIZE). */
#define CCP_MAX_MSG_BYTES 32678

static char *ipc = "genl";
module_param(ipc, charp, 0444);
MODULE_PARM_DESC(ipc, "agent transport: genl (default; generic netlink family " CCP_GENL_NAME
		 ", admin-only) or usersock (NETLINK_USERSOCK group 22, for unmodified portus)");

static bool use_genl;
static u32 nl_max_flows;		/* the highest socket id a message may name */
static ccp_nl_handler nl_handler;	/* where valid messages go */
static struct sock *ccp_usersock;	/* usersock mode */
static bool genl_registered;		/* genl mode */

/* Read-only counters in /sys/module/<module>/parameters/: logs are ratelimited, these are not. */
static atomic_t refused_messages = ATOMIC_INIT(0);
static atomic_t refused_unprivileged = ATOMIC_INIT(0);

module_param_cb(refused_messages, &ccp_atomic_ops, &refused_messages, 0400);
MODULE_PARM_DESC(refused_messages, "(read-only) malformed agent messages refused since load");
module_param_cb(refused_unprivileged, &ccp_atomic_ops, &refused_unprivileged, 0400);
MODULE_PARM_DESC(refused_unprivileged,
		 "(read-only) usersock messages refused for lacking CAP_NET_ADMIN (genl: the kernel refuses them)");

/* One CCP message from port `portid` (socket `sk`): 0, or -EINVAL when it is malformed. */
static int ccp_nl_message(u32 portid, struct sock *sk, char *msg, int len)
{
	enum ccp_invalid why = ccp_validate_msg(msg, len, nl_max_flows);

	if (why != CCP_VALID) {
		atomic_inc(&refused_messages);
		pr_warn_ratelimited("ccp: refused an agent message (%d bytes): %s\n", len,
				    ccp_validate_reason(why));
		return -EINVAL;
	}
	/* What the handler makes of a valid message is not the sender's fault: no error back. */
	nl_handler(portid, sk, msg, len);
	return 0;
}

/* ---- genl ---- */

static const struct nla_policy ccp_genl_policy[CCP_GENL_ATTR_MAX + 1] = {
	[CCP_GENL_ATTR_MSG] = { .type = NLA_BINARY, .len = CCP_MAX_MSG_BYTES },
};

static int ccp_genl_msg(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *a = info->attrs[CCP_GENL_ATTR_MSG];

	if (!a)		/* a no-op: the agent's permission check at start */
		return 0;
	if (ccp_nl_message(info->snd_portid, NETLINK_CB(skb).sk, nla_data(a), nla_len(a))) {
		NL_SET_ERR_MSG(info->extack, "ccp: malformed CCP message (see the kernel log)");
		return -EINVAL;
	}
	return 0;
}

static const struct genl_small_ops ccp_genl_ops[] = {
	{
		.cmd = CCP_GENL_CMD_MSG,
		.doit = ccp_genl_msg,
		.flags = GENL_ADMIN_PERM,
	},
};

static struct genl_family ccp_genl_family __ro_after_init = {
	.name = CCP_GENL_NAME,
	.version = CCP_GENL_VERSION,
	.maxattr = CCP_GENL_ATTR_MAX,
	.policy = ccp_genl_policy,
	.module = THIS_MODULE,
	/*
	 * No genl_mutex around our operation: libccp's state has its own lock, and the agent's
	 * messages must not queue behind every other family's users (or a flood of refused ones).
	 */
	.parallel_ops = true,
	.small_ops = ccp_genl_ops,
	.n_small_ops = ARRAY_SIZE(ccp_genl_ops),
	.resv_start_op = CCP_GENL_CMD_MSG + 1,
};

static int ccp_genl_send(u32 portid, const char *msg, int len)
{
	struct sk_buff *skb;
	void *hdr;
	int ret;

	if (!portid)
		return -ESRCH;	/* no agent has spoken yet: nobody to tell */
	skb = genlmsg_new(nla_total_size(len), GFP_ATOMIC);
	if (!skb)
		return -ENOMEM;
	hdr = genlmsg_put(skb, 0, 0, &ccp_genl_family, 0, CCP_GENL_CMD_MSG);
	if (!hdr || nla_put(skb, CCP_GENL_ATTR_MSG, len, msg)) {
		nlmsg_free(skb);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	/*
	 * Consumes skb. Never blocks: a full agent socket is -EAGAIN (and the agent sees
	 * ENOBUFS once), a port nobody holds -ECONNREFUSED.
	 */
	ret = genlmsg_unicast(&init_net, skb, portid);
	if (ret == -EAGAIN)
		return -ENOBUFS;
	if (ret == -ECONNREFUSED)
		return -ESRCH;
	return ret;
}

/* ---- usersock ---- */

/* Every netlink message of the datagram, in order (issue 16, K9: only the first was read). */
static void ccp_usersock_input(struct sk_buff *skb)
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
		ccp_nl_message(NETLINK_CB(skb).portid, NETLINK_CB(skb).sk, nlmsg_data(nlh),
			       nlmsg_len(nlh));
		msglen = min_t(u32, NLMSG_ALIGN(nlh->nlmsg_len), skb->len);
		skb_pull(skb, msglen);
	}
}

static int ccp_usersock_send(const char *msg, int len)
{
	struct nlmsghdr *nlh;
	struct sk_buff *skb;

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
	return nlmsg_multicast(ccp_usersock, skb, 0, CCP_NL_GROUP, GFP_ATOMIC);
}

/*
 * ---- the outbox ----
 *
 * libccp sends while ccp_main.c holds a flow's lock; those messages wait in this CPU's outbox
 * and go out once the lock is released (issue 16, K6: skb allocation and netlink delivery were
 * under the one lock every ACK took). The caller keeps BHs off from queueing to flushing, so
 * nothing else on the CPU touches the outbox meanwhile. Each entry: u16 length, then the message.
 */
#define CCP_OUTBOX_BYTES 4096

struct ccp_outbox {
	u16 len;
	char buf[CCP_OUTBOX_BYTES];
};

static struct ccp_outbox __percpu *outboxes;

int ccp_nl_queue(const char *msg, int len)
{
	struct ccp_outbox *box;
	u16 n = len;

	if (!outboxes)		/* libccp's READY from ccp_init(), before the transport */
		return -ENOTCONN;
	if (len <= 0 || len > U16_MAX)
		return -EINVAL;
	box = this_cpu_ptr(outboxes);
	if (box->len + sizeof(n) + len > sizeof(box->buf))
		return -ENOSPC;
	memcpy(box->buf + box->len, &n, sizeof(n));
	memcpy(box->buf + box->len + sizeof(n), msg, len);
	box->len += sizeof(u16) + len;
	return 0;
}

int ccp_nl_flush(u32 portid, int (*deliver)(u32 portid, const char *msg, int len))
{
	struct ccp_outbox *box;
	int failed = 0;
	u16 at = 0, len;

	if (!outboxes)
		return 0;
	box = this_cpu_ptr(outboxes);
	while (at < box->len) {
		memcpy(&len, box->buf + at, sizeof(len));
		failed += deliver(portid, box->buf + at + sizeof(u16), len) < 0;
		at += sizeof(u16) + len;
	}
	box->len = 0;
	return failed;
}

/* ---- both ---- */

int ccp_nl_send(u32 portid, const char *msg, int len)
{
	if (len <= 0)
		return -EINVAL;
	if (use_genl)
		return genl_registered ? ccp_genl_send(portid, msg, len) : -ENOTCONN;
	return ccp_usersock ? ccp_usersock_send(msg, len) : -ENOTCONN;
}

int ccp_nl_protocol(void)
{
	return use_genl ? NETLINK_GENERIC : NETLINK_USERSOCK;
}

int ccp_nl_init(u32 max_flows, ccp_nl_handler handler)
{
	struct netlink_kernel_cfg cfg = {
		.input = ccp_usersock_input,
	};
	int ret;

	nl_max_flows = max_flows;
	nl_handler = handler;
	outboxes = alloc_percpu(struct ccp_outbox);
	if (!outboxes)
		return -ENOMEM;
	if (sysfs_streq(ipc, "genl")) {
		use_genl = true;
	} else if (sysfs_streq(ipc, "usersock")) {
		use_genl = false;
	} else {
		pr_err("ccp: ipc=%s: use ipc=genl (default) or ipc=usersock (unmodified portus)\n",
		       ipc);
		ret = -EINVAL;
		goto err;
	}
	if (use_genl) {
		ret = genl_register_family(&ccp_genl_family);
		if (ret) {
			pr_err("ccp: cannot register the generic netlink family %s: %d\n",
			       CCP_GENL_NAME, ret);
			goto err;
		}
		genl_registered = true;
		return 0;
	}
	ccp_usersock = netlink_kernel_create(&init_net, NETLINK_USERSOCK, &cfg);
	if (!ccp_usersock) {
		pr_err("ccp: cannot create the netlink socket\n");
		ret = -ENOMEM;
		goto err;
	}
	return 0;
err:
	free_percpu(outboxes);
	outboxes = NULL;
	return ret;
}

void ccp_nl_exit(void)
{
	if (genl_registered) {
		genl_unregister_family(&ccp_genl_family);
		genl_registered = false;
	}
	if (ccp_usersock) {
		netlink_kernel_release(ccp_usersock);
		ccp_usersock = NULL;
	}
	free_percpu(outboxes);
	outboxes = NULL;
}
