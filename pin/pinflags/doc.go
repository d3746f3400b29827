// Package pinflags binds digestpin's pinning flags (--mode, --lock,
// --tag-policy, --verify, --cache and the rest) onto a pflag.FlagSet and
// turns what they hold into pin.Options, so that a program that embeds
// package pin offers the flags with the defaults, checks and messages of
// the digestpin command, which binds its flags through it too.
//
// Unlike package pin, it links signature verification: --verify's
// policies are package verify's, with sigstore-go. A program that pins
// without verifying, and would not link sigstore, fills pin.Options
// itself.
//
// The command's own flags (--filename, --log-file, --verbose, --version)
// and its environment variables (DIGESTPIN_*) are not here: Options.FlagName
// lets the command name a flag as the person set it. The one variable
// read here is the Redis password's ($DIGESTPIN_REDIS_PASSWORD, else
// $REDIS_PASSWORD), when neither the --cache URL nor
// --redis-password-file gives one.
package pinflags
