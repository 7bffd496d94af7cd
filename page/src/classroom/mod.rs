//! The classroom's state, without the page: a follower keeping up with its presenter, the
//! instructor's roster of learners, and the class panel.

pub mod class_model;
pub mod model;
pub mod roster_model;
