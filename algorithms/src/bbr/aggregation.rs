//! BBR's ACK-aggregation estimator (Linux 5.1, `bbr_update_ack_aggregation`): how many bytes the
//! ACKs delivered beyond what the bandwidth estimate predicts, the window's extra term (the why
//! is in the header of `bbr.rs`).

use super::{ACK_EPOCH_RESET_PACKETS, ACK_TRAIN_GAP, EXTRA_ACKED_BUCKET_ROUNDS};
use crate::units::{bytes_from_f64, Rate};
use crate::Report;
use std::time::Duration;

/// The estimator's state (Linux `ack_epoch_*`, `extra_acked[2]`).
#[derive(Clone, Debug, Default)]
pub(super) struct AckAggregation {
    epoch_start: Duration,
    epoch_acked_bytes: u64,
    /// Max excess per 5-round bucket, in bytes.
    buckets: [u64; 2],
    /// The bucket being filled.
    bucket: usize,
    /// Rounds since the current bucket started.
    bucket_rounds: u64,
}

impl AckAggregation {
    /// The largest excess of the last two buckets (about 10 rounds), in bytes.
    pub(super) fn extra_acked(&self) -> u64 {
        self.buckets[0].max(self.buckets[1])
    }

    /// One report that acked data (`round_start`: it began a round; `bw` the bandwidth estimate,
    /// `cwnd` the window, which caps the excess):
    ///
    /// ```text
    ///   arrival  = now - ack_train              (the report's ACKs arrived in [arrival, now])
    ///   if epoch_acked <= bw * (arrival - epoch_start): epoch_start = arrival, epoch_acked = 0
    ///   epoch_acked += acked
    ///   extra = min(epoch_acked - bw * (now - epoch_start), cwnd)
    ///   extra_acked = max of extra over two 5-round buckets
    /// ```
    pub(super) fn update(&mut self, r: &Report, round_start: bool, bw: Rate, cwnd: u64, mss: u64) {
        if round_start {
            self.bucket_rounds += 1;
            if self.bucket_rounds >= EXTRA_ACKED_BUCKET_ROUNDS {
                self.bucket_rounds = 0;
                self.bucket = 1 - self.bucket;
                self.buckets[self.bucket] = 0;
            }
        }
        let arrival = r.now.saturating_sub(ack_arrival_span(r));
        let expected_by_arrival = bw.bytes_over(arrival.saturating_sub(self.epoch_start));
        let reset_bytes = ACK_EPOCH_RESET_PACKETS.saturating_mul(mss);
        if self.epoch_acked_bytes as f64 <= expected_by_arrival
            || self.epoch_acked_bytes.saturating_add(r.bytes_acked) >= reset_bytes
        {
            self.epoch_start = arrival;
            self.epoch_acked_bytes = 0;
        }
        self.epoch_acked_bytes = self.epoch_acked_bytes.saturating_add(r.bytes_acked);
        let expected = bw.bytes_over(r.now.saturating_sub(self.epoch_start));
        let extra = bytes_from_f64(self.epoch_acked_bytes as f64 - expected).min(cwnd);
        self.buckets[self.bucket] = self.buckets[self.bucket].max(extra);
    }
}

/// How long the report's ACKs took to arrive, as far as the report can tell: its longest ACK
/// train, when a smooth ACK clock at the report's average spacing would have formed one train
/// over the whole interval (spacing at most half of [`ACK_TRAIN_GAP`]); otherwise (sparse ACKs,
/// whose trains break without any aggregation) the whole interval.
fn ack_arrival_span(r: &Report) -> Duration {
    let packets = u32::try_from(r.packets_acked.max(1)).unwrap_or(u32::MAX);
    if r.interval / packets <= ACK_TRAIN_GAP / 2 {
        r.ack_train.min(r.interval)
    } else {
        r.interval
    }
}
