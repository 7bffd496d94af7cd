//! What the page knows of runs without a browser: the bookkeeping of a run's stream of points
//! and log (which arrivals are new, where to resume), and whose each run is as the run lists
//! show it, the run list put together from its pages and changes, and what a Slurm run's page says of its job. The page keeps these in its signals and storage; here they are tested natively.

pub mod list;
pub mod names;
pub mod slurm;
pub mod stream;
pub mod whose;
