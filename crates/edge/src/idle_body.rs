//! A request body that fails when its client goes quiet or takes too long: a client that sends
//! a head and then holds the body back (or trickles it slower than one frame per `idle`) would
//! otherwise keep a connection and a task forever, and one that trickles a byte just inside
//! `idle` would keep them for as long as it liked; the header timeout covers only the head.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error an [`IdleTimeout`] body ends with when no frame came for its idle time.
#[derive(Debug, thiserror::Error)]
#[error("the request body stalled for more than {0:?}")]
pub struct BodyStalled(Duration);

/// The error an [`IdleTimeout`] body ends with when it was not all there by its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not all received in time")]
pub struct BodyTooSlow;

/// `inner`, failing with [`BodyStalled`] when no frame arrives for `idle`, and with
/// [`BodyTooSlow`] when frames still come at `by`, however steadily.
#[derive(Debug)]
pub struct IdleTimeout<B> {
    inner: B,
    idle: Duration,
    by: Instant,
    /// The earlier of the idle deadline and `by`.
    deadline: Pin<Box<Sleep>>,
}

impl<B> IdleTimeout<B> {
    pub fn new(inner: B, idle: Duration, by: Instant) -> Self {
        IdleTimeout {
            inner,
            idle,
            by,
            deadline: Box::pin(tokio::time::sleep_until(next_deadline(idle, by))),
        }
    }
}

fn next_deadline(idle: Duration, by: Instant) -> Instant {
    (Instant::now() + idle).min(by)
}

impl<B> Body for IdleTimeout<B>
where
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = next_deadline(this.idle, this.by);
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|result| result.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) if Instant::now() >= this.by => {
                    Poll::Ready(Some(Err(Box::new(BodyTooSlow))))
                }
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyStalled(this.idle))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt as _, Full};

    /// One frame, then nothing ever again (a client holding its body back).
    struct Stalled(bool);

    impl Body for Stalled {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if self.0 {
                return Poll::Pending;
            }
            self.0 = true;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{")))))
        }
    }

    #[tokio::test]
    async fn a_body_that_arrives_is_passed_through() {
        let body = IdleTimeout::new(
            Full::new(Bytes::from_static(b"{}")),
            Duration::from_secs(1),
            Instant::now() + Duration::from_secs(1),
        );
        let collected = body.collect().await.expect("the body");
        assert_eq!(collected.to_bytes(), "{}");
    }

    #[tokio::test]
    async fn a_stalled_body_fails_after_the_idle_time() {
        let body = IdleTimeout::new(
            Stalled(false),
            Duration::from_millis(20),
            Instant::now() + Duration::from_secs(60),
        );
        let error = body.collect().await.expect_err("a stalled body fails");
        assert!(error.is::<BodyStalled>(), "{error}");
    }

    /// A byte every `every`, for ever (a client trickling its body just inside the idle time).
    struct Trickle {
        every: Duration,
        next: Pin<Box<Sleep>>,
    }

    impl Trickle {
        fn new(every: Duration) -> Trickle {
            Trickle {
                every,
                next: Box::pin(tokio::time::sleep(every)),
            }
        }
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            let this = &mut *self;
            match this.next.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let next = Instant::now() + this.every;
                    this.next.as_mut().reset(next);
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b" ")))))
                }
                Poll::Pending => Poll::Pending,
            }
        }
    }

    #[tokio::test]
    async fn a_trickled_body_fails_at_its_deadline_though_never_idle() {
        let body = IdleTimeout::new(
            Trickle::new(Duration::from_millis(5)),
            Duration::from_secs(5),
            Instant::now() + Duration::from_millis(100),
        );
        // Without the deadline this body never ends: the guard fails the test instead.
        let error = tokio::time::timeout(Duration::from_secs(30), body.collect())
            .await
            .expect("the body ends by its deadline")
            .expect_err("a body past its deadline fails");
        assert!(error.is::<BodyTooSlow>(), "{error}");
    }
}
