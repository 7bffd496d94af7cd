//! `scalebook serve` as users and browsers meet it: real server processes, real trainer runs,
//! a WebSocket client speaking the protocol, and the routes in process (`routes`). The run
//! tests need the trainer built beside the server (`cargo build --bins`).

mod class;
mod class_socket;
mod classroom;
mod delivery;
mod harness;
mod learners;
mod long;
mod profile;
mod roles;
mod routes;
mod runs;
mod security;
mod tensorboard;
mod weather;
