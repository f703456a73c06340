//! The parts of [`crate::CongestionControl`] the window-based algorithms (Reno, CUBIC, Vegas)
//! share, written once. Each keeps `cwnd` and `ssthresh` in bytes, `srtt` and a `min_cwnd()`.
//!
//! `window_methods!(decision, sync, ssthresh, per_ack)`, inside an `impl CongestionControl`
//! block, writes the methods named:
//! - `decision`: the window, unpaced;
//! - `sync`: adopt an imposed window (or a rate over srtt), never under the minimum (CUBIC
//!   writes its own: it also restarts its epoch);
//! - `ssthresh`: `in_slow_start` (cwnd < ssthresh) and `adopt` (the window, and out of slow
//!   start when the old controller was), through the algorithm's `sync`;
//! - `per_ack`: `ack_growth_limit`, slow start carried out per ACK by the datapath up to ssthresh.

macro_rules! window_methods {
    () => {};
    (decision $(, $rest:ident)*) => {
        fn decision(&self) -> $crate::Decision {
            $crate::Decision { cwnd_bytes: self.cwnd, rate: None }
        }
        $crate::window_controls::window_methods!($($rest),*);
    };
    (sync $(, $rest:ident)*) => {
        fn sync(&mut self, to: $crate::Sync) {
            self.cwnd = to.window_bytes(self.cwnd, self.srtt).max(self.min_cwnd());
        }
        $crate::window_controls::window_methods!($($rest),*);
    };
    (ssthresh $(, $rest:ident)*) => {
        fn in_slow_start(&self) -> bool {
            self.cwnd < self.ssthresh
        }

        /// The window, and out of slow start (ssthresh = the window) when the old controller was.
        fn adopt(&mut self, from: &$crate::Handover) {
            self.sync($crate::Sync::Cwnd(from.cwnd_bytes));
            if !from.in_slow_start {
                self.ssthresh = self.cwnd;
            }
        }
        $crate::window_controls::window_methods!($($rest),*);
    };
    (per_ack $(, $rest:ident)*) => {
        /// Slow start grows by what is acked up to ssthresh: per ACK in the datapath between reports.
        fn ack_growth_limit(&self) -> Option<u64> {
            self.in_slow_start().then_some(self.ssthresh)
        }
        $crate::window_controls::window_methods!($($rest),*);
    };
}
pub(crate) use window_methods;
