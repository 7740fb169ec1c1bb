//! `caal home`: the home model in effect (areas, devices, other names), and
//! its import from Home Assistant as a `[home]` table to keep in the
//! configuration.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use caal::config::{Config, HomeConfig};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum HomeCommand {
    /// The areas and devices parameters resolve against, with their other names.
    Show {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Read the areas and devices from Home Assistant ([executors.home_assistant]:
    /// its url and the variable holding the token) and print them as a
    /// `[home]` table for the configuration (device ids are entity ids).
    Import {
        /// Write the table to this file instead of printing it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace the file `--out` names if it exists.
        #[arg(long)]
        force: bool,
        /// Print one JSON object (areas and devices) instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

/// The `[home]` table as TOML, with a line saying where it came from.
fn as_toml(home: &HomeConfig, origin: &str) -> Result<String> {
    #[derive(serde::Serialize)]
    struct Table<'a> {
        home: &'a HomeConfig,
    }
    let body =
        toml::to_string(&Table { home }).context("the imported home cannot be written as TOML")?;
    Ok(format!(
        "# The home as Home Assistant at {origin} knows it ({} areas, {} devices), from `caal home import`.\n# Keep it in your configuration (config/caal.toml or --config); device ids are entity ids.\n{body}",
        home.areas.len(),
        home.devices.len()
    ))
}

pub fn run(config: &Config, command: HomeCommand) -> Result<()> {
    match command {
        HomeCommand::Show { json } => {
            let home = caal::understand::Home::from_config(&config.home)?;
            if json {
                println!("{}", serde_json::to_string(&config.home)?);
                return Ok(());
            }
            for area in &home.areas {
                let mut line = area.name.clone();
                if !area.aliases.is_empty() {
                    line.push_str(&format!(" (also: {})", area.aliases.join(", ")));
                }
                let devices: Vec<&str> = home
                    .devices
                    .iter()
                    .filter(|d| d.area.as_deref() == Some(area.name.as_str()))
                    .map(|d| d.name.as_str())
                    .collect();
                if !devices.is_empty() {
                    line.push_str(&format!(": {}", devices.join(", ")));
                }
                println!("{line}");
            }
            let nowhere: Vec<&str> = home
                .devices
                .iter()
                .filter(|d| d.area.is_none())
                .map(|d| d.name.as_str())
                .collect();
            if !nowhere.is_empty() {
                println!("(no area): {}", nowhere.join(", "));
            }
            Ok(())
        }
        HomeCommand::Import { out, force, json } => {
            let Some(ha) = &config.executors.home_assistant else {
                bail!(
                    "Home Assistant is not configured: set [executors.home_assistant] url and token_env"
                );
            };
            if let Some(path) = &out
                && path.exists()
                && !force
            {
                bail!(
                    "{} exists; pass --force to replace it, or name another file",
                    path.display()
                );
            }
            let home = caal::tools::ha_home::import(ha, &|k| std::env::var(k).ok())?;
            // What was read must make a home CAAL can use before it is written.
            caal::understand::Home::from_config(&home)
                .context("Home Assistant's areas and devices do not make a valid [home]")?;
            // The rest of the configuration may name rooms this home has not
            // (the default macros' hall): said now, with what to change.
            let mut with = config.clone();
            with.home = home.clone();
            if let Err(e) = caal::router::Router::compile(&with) {
                eprintln!(
                    "caal: note: with this home the rest of the configuration does not hold: {e}; change that part of your configuration when you add this [home] table"
                );
            }
            let text = if json {
                serde_json::to_string(&home)?
            } else {
                as_toml(&home, &ha.url)?
            };
            match out {
                Some(path) => {
                    std::fs::write(&path, &text)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!(
                        "wrote {} areas and {} devices to {}",
                        home.areas.len(),
                        home.devices.len(),
                        path.display()
                    );
                }
                None => println!("{text}"),
            }
            Ok(())
        }
    }
}
