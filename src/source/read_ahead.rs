//! A stream read ahead of its consumer on a task of its own: while a release watch decodes one
//! part of a list on every core, its watcher asks the API server for the next page and reads
//! it, instead of waiting for the decode to end before it asks. The API server's part of a
//! start (reading etcd, encoding the page) and the locker's (decoding, parsing) so overlap.

use futures::stream::{BoxStream, StreamExt};
use tracing::Instrument;

/// `stream`, driven on its own task up to `ahead` items before what the consumer took. The
/// task ends when the stream does, or when the returned stream is dropped (at its next item).
pub(crate) fn read_ahead<T: Send + 'static>(
    mut stream: BoxStream<'static, T>,
    ahead: usize,
) -> BoxStream<'static, T> {
    let (sender, receiver) = tokio::sync::mpsc::channel(ahead.max(1));
    tokio::spawn(
        async move {
            while let Some(item) = stream.next().await {
                if sender.send(item).await.is_err() {
                    break;
                }
            }
        }
        .instrument(tracing::Span::current()),
    );
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn items_arrive_in_order_and_the_stream_ends_with_its_source() {
        let source = futures::stream::iter(0..1000).boxed();
        let read: Vec<i32> = read_ahead(source, 16).collect().await;
        assert_eq!(read, (0..1000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn the_source_is_read_ahead_of_the_consumer_by_at_most_ahead_items() {
        let produced = Arc::new(AtomicUsize::new(0));
        let counted = produced.clone();
        let source = futures::stream::iter(0..1000)
            .inspect(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .boxed();
        let mut stream = read_ahead(source, 16);
        assert_eq!(stream.next().await, Some(0));
        // The consumer waits (a part being decoded): the source goes on without it.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let ahead = produced.load(Ordering::SeqCst);
        // One taken, 16 in the channel, one held by the task waiting for room.
        assert!((16..=18).contains(&ahead), "{ahead} read");
    }

    #[tokio::test]
    async fn dropping_the_stream_stops_reading_its_source() {
        let produced = Arc::new(AtomicUsize::new(0));
        let counted = produced.clone();
        let source = futures::stream::iter(0..)
            .inspect(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .then(|i| async move {
                tokio::task::yield_now().await;
                i
            })
            .boxed();
        let mut stream = read_ahead(source, 4);
        assert_eq!(stream.next().await, Some(0));
        drop(stream);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let stopped = produced.load(Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(produced.load(Ordering::SeqCst), stopped, "still reading");
        assert!(stopped < 20, "{stopped} read");
    }
}
