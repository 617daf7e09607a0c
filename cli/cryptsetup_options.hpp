// cryptsetup's option names on the container commands (luks, tcrypt, bitlk,
// fvault2, loopaes, crypt). cryptsetup 2.6.1 accepts its global options with
// every action, and scripts pass them; a command calls
// add_cryptsetup_options() last, and every cryptsetup name it does not define
// itself is then accepted: most change nothing here (no locks, no kernel
// keyring, no device-mapper flags), a few are cryptsetup's aliases of ours,
// and the few that would change what is read are refused with the reason.
// The table and its reasons are in docs/cryptsetup-options.md.
#pragma once

#include "common.hpp"

#include <string>

namespace cli {

// `type` is the --type value that names this command's format ("tcrypt";
// "luks" accepts luks, luks1 and luks2; "plain" for crypt).
void add_cryptsetup_options(CommandLine& cl, const std::string& type);

}  // namespace cli
