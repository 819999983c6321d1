//! The same option table as a [`clap::Command`], for what clap's ecosystem
//! generates well: man pages (clap_mangen) and shell completions
//! (clap_complete). Parsing stays with [`crate::parse`].

use clap::{Arg, ArgAction, Command};

use crate::getopt::{Arity, OptDef};

/// A clap command describing `defs` (hidden options stay hidden).
pub fn command(name: &'static str, about: &'static str, defs: &[OptDef]) -> Command {
    let mut cmd = Command::new(name)
        .about(about)
        .disable_help_flag(true)
        .disable_version_flag(true);
    for d in defs {
        let mut arg = Arg::new(d.id).help(d.help).hide(d.hidden);
        if let Some(c) = d.short {
            arg = arg.short(c);
        }
        if let Some(l) = d.long {
            arg = arg.long(l);
        }
        arg = match d.arity {
            Arity::None => arg.action(ArgAction::SetTrue),
            Arity::Required => arg.value_name(d.value_name).num_args(1),
            Arity::OptionalNumeric | Arity::OptionalWord => {
                arg.value_name(d.value_name).num_args(0..=1)
            }
        };
        cmd = cmd.arg(arg);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_appears() {
        let defs = [
            OptDef::flag("v4", '4', "IPv4"),
            OptDef::value("length", 'l', "secs", "length"),
            OptDef::long_only("json", "json", Arity::None, "", "json"),
            OptDef::flag("cpu", 'c', "cpu").with_arity(Arity::OptionalNumeric),
            OptDef::flag("secret", 'x', "x").hidden(),
        ];
        let cmd = command("t", "a test", &defs);
        cmd.clone().debug_assert();
        let ids: Vec<&str> = cmd.get_arguments().map(|a| a.get_id().as_str()).collect();
        assert_eq!(ids, ["v4", "length", "json", "cpu", "secret"]);
        assert!(
            cmd.get_arguments()
                .find(|a| a.get_id() == "secret")
                .unwrap()
                .is_hide_set()
        );
    }
}
