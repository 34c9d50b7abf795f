//! The operators' console (`--console-listen`): server-rendered pages of
//! tables, consumers, leases, lag and fences, read through the same
//! application layer as the gRPC API. It changes nothing; it shows the CLI
//! and grpcurl lines that would.
//!
//! Access follows the API's: without credentials configured it is open
//! (and, like the gRPC port, only on loopback unless told otherwise); with
//! them, a viewer or operator token — sent as `Authorization: Bearer` or
//! posted once to the sign-in form, which keeps it server-side behind a
//! session cookie — and only the tables in the token's scope. Every page
//! carries a Content-Security-Policy that allows only this server's own
//! script and style files.

mod actions;
mod chart;
mod consumer;
mod fence;
mod format;
mod layers;
mod names;
mod pages;
mod picture;
mod session;
mod shared;

use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::Router;
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use tidemark_core::{BranchName, FieldViolation, TableName};
pub use tidemark_net::HttpLimits;
use tidemark_service::App;
use tidemark_service::store::StoreError;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use pages::{Chrome, ErrorPage, SignInPage, error_status};
use session::{Refusal, Viewer};
use shared::SharedReads;
use tidemark_service::auth::SharedAuth;

/// What every page is sent with: only this server's own files may run or
/// style it, nothing may frame it, and forms post only to it.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// How the gRPC API answers an error, as the console shows it: the status
/// code (a `google.rpc.Code` number) and the message, never SQL text. The
/// server's one mapping from errors to statuses supplies it.
pub type ErrorAnswer = fn(StoreError) -> (i32, String);

/// The TLS configuration the console serves HTTPS with, as it stands now
/// (the server's, reloaded with it).
pub type TlsConfig = tidemark_net::TlsSource;

/// The console's settings.
#[derive(Debug, Clone)]
pub struct ConsoleSettings {
    /// How often pages refresh themselves (zero: never).
    pub refresh: Duration,
    /// Connections, header deadline and idle timeout
    /// (`--console-max-connections`, `--console-header-timeout`,
    /// `--console-idle-timeout`).
    pub limits: HttpLimits,
    /// How long a page may take, like an RPC's deadline
    /// (`--request-timeout`); the table stores' calls fit inside it.
    pub page_deadline: Duration,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        Self {
            refresh: Duration::from_secs(5),
            limits: HttpLimits {
                max_connections: 256,
                header_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(60),
            },
            page_deadline: Duration::from_secs(10),
        }
    }
}

/// A table (from the query's field `table_field`) and a branch.
fn table_and_branch(table: &str, table_field: &str, branch: &str) -> Result<(TableName, BranchName), FieldViolation> {
    Ok((
        TableName::parse(table, table_field)?,
        BranchName::parse(branch, "branch")?,
    ))
}

/// What every console handler shares.
#[derive(Debug, Clone)]
pub(crate) struct Console {
    app: App,
    auth: SharedAuth,
    errors: ErrorAnswer,
    refresh: Duration,
    /// The tables page's read, by the viewer's scope, shared for one
    /// refresh interval.
    overviews: Arc<SharedReads<String, tidemark_service::Overview>>,
    /// A table page's read, by table and branch, shared likewise.
    table_pages: Arc<SharedReads<(String, String), pages::TableData>>,
    /// This replica's secret behind the CSRF tokens of callers without a
    /// session (a session's token comes from its id).
    csrf_key: Arc<[u8; 32]>,
}

impl Console {
    /// The caller, or the answer that turns it away (boxed: it is large).
    async fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Box<Response>> {
        session::identify(&self.auth, &self.app, headers)
            .await
            .map_err(|refusal| Box::new(refused(refusal, headers)))
    }

    /// The caller and what its page is about (`asked`, read from the
    /// query), when the caller may see `table_of` it; otherwise the answer
    /// that turns it away: a sign-in, a bad request naming the field, or
    /// "not in your scope".
    async fn viewing<T>(
        &self,
        headers: &HeaderMap,
        asked: Result<T, FieldViolation>,
        table_of: impl Fn(&T) -> &TableName,
    ) -> Result<(Viewer, T), Box<Response>> {
        let viewer = self.viewer(headers).await?;
        let subject = asked.map_err(|e| Box::new(self.bad_request(&viewer, &e.field, &e.description)))?;
        if !viewer.sees(table_of(&subject)) {
            return Err(Box::new(self.not_in_scope(&viewer, table_of(&subject).as_str())));
        }
        Ok((viewer, subject))
    }

    fn chrome(&self, viewer: &Viewer) -> Chrome {
        Chrome {
            principal: viewer.principal.clone(),
            signed_in: viewer.session,
            refresh_seconds: self.refresh.as_secs(),
        }
    }

    fn render(&self, page: impl Template) -> Response {
        match page.render() {
            Ok(html) => html_response(StatusCode::OK, html),
            Err(e) => {
                tracing::error!("console page failed to render: {e}");
                (StatusCode::INTERNAL_SERVER_ERROR, "the page failed to render").into_response()
            }
        }
    }

    fn error_page(&self, viewer: &Viewer, status: StatusCode, heading: &str, message: String) -> Response {
        let chrome = self.chrome(viewer);
        let mut response = self.render(ErrorPage {
            principal: chrome.principal,
            signed_in: chrome.signed_in,
            refresh_seconds: 0,
            heading: heading.to_owned(),
            message,
        });
        *response.status_mut() = status;
        response
    }

    fn bad_request(&self, viewer: &Viewer, field: &str, description: &str) -> Response {
        self.error_page(
            viewer,
            StatusCode::BAD_REQUEST,
            "Bad request",
            format!("{field}: {description}"),
        )
    }

    /// A table outside the caller's scope looks like one that does not
    /// exist: the page says neither.
    fn not_in_scope(&self, viewer: &Viewer, table: &str) -> Response {
        self.error_page(
            viewer,
            StatusCode::NOT_FOUND,
            "Not found",
            format!("No table {table} in your scope."),
        )
    }

    /// The error the gRPC API would give, as a page (never SQL text).
    fn store_error(&self, viewer: &Viewer, err: StoreError) -> Response {
        let (code, message) = (self.errors)(err);
        self.error_page(viewer, error_status(code), "The request failed", message)
    }
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// A refused request: the sign-in page for browsers (a redirect), a 401
/// for a bearer token that is not known, a 403 naming the missing role.
fn refused(refusal: Refusal, headers: &HeaderMap) -> Response {
    match refusal {
        Refusal::SignIn => {
            let mut response = Redirect::to("/signin").into_response();
            if session::session_id(headers).is_some() {
                // A cookie that no longer opens anything is cleared.
                response.headers_mut().insert(header::SET_COOKIE, clear_cookie());
            }
            response
        }
        Refusal::Unavailable(message) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            format!("The console cannot read your session: {message}."),
        )
            .into_response(),
        Refusal::Unknown => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unknown token",
        )
            .into_response(),
        Refusal::Forbidden { principal, roles } => {
            let page = SignInPage {
                message: format!(
                    "{principal} ({roles}) may not use the console: it needs the viewer or operator role."
                ),
                session_hours: session::SESSION_TTL.as_secs() / 3600,
            };
            match page.render() {
                Ok(html) => html_response(StatusCode::FORBIDDEN, html),
                Err(_) => StatusCode::FORBIDDEN.into_response(),
            }
        }
    }
}

fn clear_cookie() -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{}=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0",
        session::COOKIE
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

async fn signin_form(State(console): State<Console>, headers: HeaderMap) -> Response {
    if console.viewer(&headers).await.is_ok() {
        return Redirect::to("/").into_response();
    }
    signin_page(StatusCode::OK, String::new())
}

fn signin_page(status: StatusCode, message: String) -> Response {
    let page = SignInPage {
        message,
        session_hours: session::SESSION_TTL.as_secs() / 3600,
    };
    match page.render() {
        Ok(html) => html_response(status, html),
        Err(_) => status.into_response(),
    }
}

#[derive(Deserialize)]
struct SignIn {
    token: String,
}

/// Whether a form post comes from this console's own pages: browsers send
/// `Origin` with every POST, and it must name the host the page came from.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| !host.is_empty() && authority == host)
}

async fn signin(State(console): State<Console>, headers: HeaderMap, Form(form): Form<SignIn>) -> Response {
    if !same_origin(&headers) {
        return signin_page(StatusCode::FORBIDDEN, "Sign in from the console's own page.".to_owned());
    }
    let config = console.auth.current();
    if !config.is_enabled() {
        return Redirect::to("/").into_response();
    }
    let token = form.token.trim();
    let Some(grant) = config.authenticate_token(token) else {
        return signin_page(StatusCode::UNAUTHORIZED, "That token is not known.".to_owned());
    };
    if let Err(refusal) = session::allowed(&grant) {
        return refused(refusal, &headers);
    }
    let id = match session::open(&console.app, token, &grant.principal).await {
        Ok(id) => id,
        Err(e) => return signin_page(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    tracing::info!(principal = %grant.principal, "console sign-in");
    let cookie = format!(
        "{}={id}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={}",
        session::COOKIE,
        session::SESSION_TTL.as_secs()
    );
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn signout(State(console): State<Console>, headers: HeaderMap) -> Response {
    if let Some(id) = session::session_id(&headers)
        && let Err(e) = session::close(&console.app, &id).await
    {
        // Not signed out: say so rather than pretend (the cookie stays).
        return signin_page(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("You are still signed in: {e}."),
        );
    }
    let mut response = Redirect::to("/signin").into_response();
    response.headers_mut().insert(header::SET_COOKIE, clear_cookie());
    response
}

const CSS: &str = include_str!("assets/console.css");
const SCRIPT: &str = include_str!("assets/refresh.js");

async fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT).into_response()
}

/// The console's routes over `app`, its callers checked against `auth`,
/// errors answered as `errors` says the gRPC API would.
pub fn router(app: App, auth: SharedAuth, settings: &ConsoleSettings, errors: ErrorAnswer) -> Router {
    let console = Console {
        app,
        auth,
        errors,
        refresh: settings.refresh,
        overviews: Arc::new(SharedReads::new(settings.refresh)),
        table_pages: Arc::new(SharedReads::new(settings.refresh)),
        csrf_key: Arc::new({
            let mut key = [0u8; 32];
            // Without randomness the key stays zero: tokens of callers
            // without a session are then guessable, and such callers are
            // loopback-only (serve refuses an open console elsewhere).
            let _ = getrandom::fill(&mut key);
            key
        }),
    };
    Router::new()
        .route("/", get(pages::tables))
        .route("/table", get(pages::table))
        .route("/consumer", get(consumer::consumer))
        .route("/fence", get(fence::fence))
        .route("/consumer/revoke", post(actions::plan_revoke))
        .route("/consumer/revoke/confirm", post(actions::confirm_revoke))
        .route("/consumer/reset", post(actions::plan_reset))
        .route("/consumer/reset/confirm", post(actions::confirm_reset))
        .route("/consumer/delete", post(actions::plan_delete))
        .route("/consumer/delete/confirm", post(actions::confirm_delete))
        .route("/table/reset", post(actions::plan_bulk_reset))
        .route("/table/reset/confirm", post(actions::confirm_bulk_reset))
        .route("/signin", get(signin_form).post(signin))
        .route("/signout", post(signout))
        .route("/static/console.css", get(stylesheet))
        .route("/static/refresh.js", get(script))
        .layer(axum::middleware::from_fn_with_state(
            settings.page_deadline,
            layers::page_deadline,
        ))
        .layer(axum::middleware::from_fn(layers::secure_headers))
        .with_state(console)
}

/// The console on `listener` over `app`, as [`router`] and [`serve`]
/// make it, running until `stop`.
pub fn start(
    listener: TcpListener,
    settings: &ConsoleSettings,
    app: App,
    auth: SharedAuth,
    tls: Option<TlsConfig>,
    errors: ErrorAnswer,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(serve(
        listener,
        router(app, auth, settings, errors),
        tls,
        settings.limits,
        stop,
    ))
}

/// Serves `router` on `listener` (HTTPS with `tls`) until `stop`, within
/// `limits`: at most so many connections, headers within a deadline, and
/// no connection idle for longer than the idle timeout (the console is
/// reachable before sign-in: a slowloris must not hold descriptors).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsConfig>,
    limits: HttpLimits,
    stop: CancellationToken,
) {
    tidemark_net::serve_http1("console", listener, TowerToHyperService::new(router), tls, limits, stop).await;
}
