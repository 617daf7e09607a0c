// Man pages and bash completion made from the commands' own option tables
// (the CommandLine each command parses with), so they cannot drift from
// --help. `blkcrypt --generate-man DIR` and `blkcrypt
// --generate-bash-completion FILE` (hidden; run by the build) write them.
#pragma once

#include "common.hpp"

#include <string>
#include <vector>

namespace cli {

// A top-level alias: `blkcrypt luksDump` is `blkcrypt luks dump`.
struct CommandAlias {
    std::string name, command, action;
};

struct CommandDoc {
    std::string name;     // "crypt"
    std::string summary;  // the line of `blkcrypt --help`
    CommandLine cl;
};

// The CommandLine of a command: runs it in describe mode (nothing parsed,
// nothing done). words reach the command first (fsverity needs "digest").
CommandLine describe_command(int (*run)(Args), const std::vector<std::string>& words);

// roff sources: blkcrypt(8), and blkcrypt-NAME(8) for one command.
std::string main_man_page(const std::vector<CommandDoc>& docs);
std::string command_man_page(const CommandDoc& doc);
// A bash script defining _blkcrypt and `complete -F _blkcrypt blkcrypt`.
// It completes the aliases as their command and action, and the values of
// options whose value name lists them ("luks1|luks2").
std::string bash_completion(const std::vector<CommandDoc>& docs, const std::vector<CommandAlias>& aliases);

// dir/blkcrypt.8 and dir/blkcrypt-NAME.8 for every command (dir is created).
void write_man_pages(const std::vector<CommandDoc>& docs, const std::string& dir);

}  // namespace cli
