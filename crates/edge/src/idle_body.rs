//! A request body that fails when its client goes quiet: a client that sends a head and then
//! holds the body back (or trickles it slower than one frame per `idle`) would otherwise keep
//! a connection and a task forever; the header timeout covers only the head.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error an [`IdleTimeout`] body ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body stalled for more than {0:?}")]
pub struct BodyStalled(Duration);

/// `inner`, failing with [`BodyStalled`] when no frame arrives for `idle`.
#[derive(Debug)]
pub struct IdleTimeout<B> {
    inner: B,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<B> IdleTimeout<B> {
    pub fn new(inner: B, idle: Duration) -> Self {
        IdleTimeout {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }
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
                let next = Instant::now() + this.idle;
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|result| result.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
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
        let body = IdleTimeout::new(Full::new(Bytes::from_static(b"{}")), Duration::from_secs(1));
        let collected = body.collect().await.expect("the body");
        assert_eq!(collected.to_bytes(), "{}");
    }

    #[tokio::test]
    async fn a_stalled_body_fails_after_the_idle_time() {
        let body = IdleTimeout::new(Stalled(false), Duration::from_millis(20));
        let error = body.collect().await.expect_err("a stalled body fails");
        assert!(error.is::<BodyStalled>(), "{error}");
    }
}
