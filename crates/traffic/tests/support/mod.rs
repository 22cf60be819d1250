#![allow(dead_code)]

pub mod user_agents;
