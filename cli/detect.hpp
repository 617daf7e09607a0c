// The commands that find IMAGE's format themselves (blkcrypt dump,
// test-passphrase, decrypt, table, open, and serve IMAGE): the signature
// (containers::detect), or --type as `cryptsetup open --type` names it,
// picks the format's command, which then runs with the same words.
#pragma once

#include "common.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace cli {

// The --type values as a value name, "luks|luks1|...|fvault2" (cryptsetup
// 2.6.1's names), with serve's "|raw" when raw is true.
std::string type_value_name(bool raw);

// What route_to_format decided.
struct Routed {
    std::optional<int> status;  // the format's command ran: its exit status
    bool help = false;          // --help was given: the caller prints its own
};

// For serve (`own`: serve's own option table, which the words may use too):
// a LUKS, BitLocker or FileVault 2 image, or --type naming a format, runs
// `blkcrypt FORMAT serve ...`; no status (the caller serves the raw bytes)
// for --type raw, --dm-table, an image without one of those signatures, or
// no IMAGE at all (the caller's own parser says what is missing).
Routed route_serve(Args args, const po::options_description& own);

// serve's options (cmd_serve.cpp); open takes them too.
CommandLine serve_command_line();

}  // namespace cli
