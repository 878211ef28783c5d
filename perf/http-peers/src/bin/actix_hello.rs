//! actix-web with WORKERS workers (default 2): `GET /hello` -> "hello, world".
//! Usage: actix_hello PORT [WORKERS]
use actix_web::{get, App, HttpServer, Responder};

#[get("/hello")]
async fn hello() -> impl Responder {
    "hello, world"
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(8082);
    let workers: usize = std::env::args().nth(2).and_then(|w| w.parse().ok()).unwrap_or(2);
    actix_web::rt::System::new().block_on(async move {
        println!("actix-web listening on {port}");
        HttpServer::new(|| App::new().service(hello))
            .workers(workers)
            .bind(("127.0.0.1", port))?
            .run()
            .await
    })
}
