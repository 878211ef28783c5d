//! The handler: [`HandlerOutput`], what an application's handler
//! produces, and `Handler`, the type-erased handler every protocol calls;
//! with the answer the server gives a handler too slow for the request
//! timeout. The bottom of the crate's layers, beside `settings.rs` and
//! `connection.rs`.

use crate::body::Body;
use http::{Request, Response, StatusCode};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The type-erased handler.
pub(crate) type Handler = Arc<
    dyn Fn(Request<Body>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync,
>;

/// What a handler's future may produce: a [`Response`], or a `Result` of
/// one whose error is answered `500 Internal Server Error`, the error
/// logged (error level, in the request's span), and the server goes on.
///
/// ```
/// use http::{Request, Response};
/// use proscenium::ActorSystem;
/// use proscenium_http::{Body, Http};
///
/// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let binding = Http::bind(&system, "127.0.0.1:0".parse()?, |request: Request<Body>| async move {
///     let text = std::str::from_utf8(request.body().as_bytes())?.to_owned();
///     Ok::<_, std::str::Utf8Error>(Response::new(Body::from(text)))
/// })?;
/// # binding.terminate(std::time::Duration::from_secs(1)).wait()?;
/// # system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait HandlerOutput: Send + 'static {
    /// The response this output is answered with.
    fn into_response(self) -> Response<Body>;
}

impl HandlerOutput for Response<Body> {
    fn into_response(self) -> Response<Body> {
        self
    }
}

impl<E> HandlerOutput for Result<Response<Body>, E>
where
    E: fmt::Display + Send + 'static,
{
    fn into_response(self) -> Response<Body> {
        match self {
            Ok(response) => response,
            Err(e) => {
                tracing::error!(error = %e, "the handler failed: answered 500");
                crate::wire::empty_response(http::StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

/// Akka HTTP's answer to a request its handler did not answer within the
/// request timeout (`akka.http.server.request-timeout`): 503 with its text.
pub(crate) fn request_timeout_response() -> Response<Body> {
    let mut response = Response::new(Body::from(
        "The server was not able to produce a timely response to your request.\r\n\
         Please try again in a short while!",
    ));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    response
}
