//! A counter and a histogram that every review updates, kept in shards: each thread counts on
//! its own cache line, and `/metrics` adds the shards up.
//!
//! prometheus-client's `Counter` is one atomic and its `Histogram` one mutex. Every review of
//! every worker thread wrote to them, so each write moved their cache line from the other core
//! first: measured on 2 cores at full load (scripts/load.sh's `max h1`), counting a review in
//! them cost about 5% of the throughput. A relaxed add on a line only one thread writes costs
//! a few nanoseconds.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// More shards than the runtime's worker threads on most nodes; threads beyond them share
/// shards, which stays correct (the adds are atomic), only slower.
const SHARDS: usize = 16;

/// One cache line (two on CPUs that fetch lines in pairs), so shards never share one.
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// The shard of the calling thread: threads take shards in turn, the first time they count.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

/// A monotonic count, for `Family<_, ShardedCounter>` as for a single series.
#[derive(Clone, Default)]
pub(crate) struct ShardedCounter {
    shards: Arc<[Padded<AtomicU64>; SHARDS]>,
}

impl ShardedCounter {
    pub(crate) fn inc(&self) {
        self.shards[shard()].0.fetch_add(1, Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.shards.iter().map(|s| s.0.load(Relaxed)).sum()
    }
}

impl std::fmt::Debug for ShardedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ShardedCounter").field(&self.get()).finish()
    }
}

impl TypedMetric for ShardedCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for ShardedCounter {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// One shard of a histogram: a count per bucket, and the sum in nanoseconds.
struct HistogramShard {
    buckets: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
}

/// A histogram of durations with fixed bucket bounds, in seconds as Prometheus wants them.
#[derive(Clone)]
pub(crate) struct ShardedHistogram {
    /// The upper bounds, ascending; the last is +Inf.
    bounds: Arc<[f64]>,
    shards: Arc<[Padded<HistogramShard>]>,
}

impl ShardedHistogram {
    /// Buckets with these upper bounds in seconds (in any order; +Inf is added).
    pub(crate) fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let mut bounds: Vec<f64> = bounds.into_iter().filter(|b| b.is_finite()).collect();
        bounds.sort_by(f64::total_cmp);
        bounds.dedup();
        bounds.push(f64::INFINITY);
        let shards = (0..SHARDS)
            .map(|_| {
                Padded(HistogramShard {
                    buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
                    sum_nanos: AtomicU64::new(0),
                })
            })
            .collect();
        Self {
            bounds: bounds.into(),
            shards,
        }
    }

    pub(crate) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        // The first bucket whose bound is at least the value; the last (+Inf) takes the rest.
        let bucket = self.bounds.partition_point(|bound| *bound < seconds);
        let shard = &self.shards[shard()].0;
        shard.buckets[bucket.min(self.bounds.len() - 1)].fetch_add(1, Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        shard.sum_nanos.fetch_add(nanos, Relaxed);
    }

    /// The count in each bucket (not cumulative), with its upper bound; the sum in seconds and
    /// the count of all observations.
    pub(crate) fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let mut buckets: Vec<(f64, u64)> = self.bounds.iter().map(|b| (*b, 0)).collect();
        let mut sum_nanos: u64 = 0;
        for shard in self.shards.iter() {
            for (total, count) in buckets.iter_mut().zip(shard.0.buckets.iter()) {
                total.1 += count.load(Relaxed);
            }
            sum_nanos = sum_nanos.wrapping_add(shard.0.sum_nanos.load(Relaxed));
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        (buckets, sum_nanos as f64 / 1e9, count)
    }
}

impl std::fmt::Debug for ShardedHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (buckets, sum, count) = self.snapshot();
        f.debug_struct("ShardedHistogram")
            .field("buckets", &buckets)
            .field("sum", &sum)
            .field("count", &count)
            .finish()
    }
}

impl TypedMetric for ShardedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ShardedHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (buckets, sum, count) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let counter = ShardedCounter::default();
        std::thread::scope(|s| {
            for _ in 0..(SHARDS + 3) {
                s.spawn(|| (0..1000).for_each(|_| counter.inc()));
            }
        });
        assert_eq!(counter.get(), 1000 * (SHARDS as u64 + 3));
    }

    #[test]
    fn each_duration_lands_in_the_first_bucket_at_least_as_large() {
        let histogram = ShardedHistogram::new([0.001, 0.0001, 0.01]);
        for micros in [50, 100, 101, 999, 1000, 5000, 10_000, 20_000, 3_000_000] {
            histogram.observe(Duration::from_micros(micros));
        }
        let (buckets, sum, count) = histogram.snapshot();
        assert_eq!(
            buckets,
            vec![(0.0001, 2), (0.001, 3), (0.01, 2), (f64::INFINITY, 2)]
        );
        assert_eq!(count, 9);
        assert!((sum - 3.037_250).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn observations_from_many_threads_add_up() {
        let histogram = ShardedHistogram::new([0.5]);
        std::thread::scope(|s| {
            for t in 0..(SHARDS + 3) {
                let histogram = &histogram;
                s.spawn(move || {
                    let d = Duration::from_secs(if t % 2 == 0 { 0 } else { 1 });
                    (0..100).for_each(|_| histogram.observe(d));
                });
            }
        });
        let (buckets, sum, count) = histogram.snapshot();
        let odd = (SHARDS as u64 + 3) / 2;
        let even = SHARDS as u64 + 3 - odd;
        assert_eq!(buckets, vec![(0.5, even * 100), (f64::INFINITY, odd * 100)]);
        assert_eq!(count, (SHARDS as u64 + 3) * 100);
        assert_eq!(sum, (odd * 100) as f64);
    }
}
