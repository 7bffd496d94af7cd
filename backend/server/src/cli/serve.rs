//! `scalebook serve`: start the notebook server and print the URL to open.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use scalebook_server::app::{self, AppState};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. The default keeps the server private to this machine.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Directory with index.html, the built front-end (dist/) and the chapter files.
    #[arg(long, default_value = "static")]
    static_dir: PathBuf,
    /// The training configs offered in the notebook.
    #[arg(long, default_value = "config/ViT.yaml")]
    yaml_config: PathBuf,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    app::check_static_dir(&args.static_dir)?;
    let state = AppState::load(&args.yaml_config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let bound = listener.local_addr()?;
        // Tests and wrappers read this line to learn the port; keep its shape stable.
        println!("Scalebook is ready: http://{bound}/");
        std::io::stdout().flush()?;
        axum::serve(listener, app::router(state, args.static_dir))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(ExitCode::SUCCESS)
    })
}
