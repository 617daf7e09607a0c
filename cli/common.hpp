// Helpers shared by the blkcrypt commands: the two error kinds, command-line
// parsing, hex, and file I/O. Exceptions are used here and nowhere else: the
// library reports through Status/Result, the CLI turns that into exit codes.
#pragma once

#include <blkcrypt/alg_info.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <boost/program_options.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cli {

namespace po = boost::program_options;
using Args = std::span<const std::string>;  // the words after the command name

// Bad command line, key, IV or algorithm name: exit 2.
class UsageError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The operation itself failed (I/O, tag check, self-test): exit 1.
class Failure : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A failure with the exit status of the peer tool a command mirrors (verity
// verify exits as veritysetup verify does); see docs/exit-status.md.
class StatusFailure : public Failure {
public:
    StatusFailure(const std::string& msg, int status) : Failure(msg), status_(status) {}
    int status() const noexcept { return status_; }

private:
    int status_;
};

// cryptsetup's exit statuses that the library's Status maps to (its
// translate_errno): a secret that opens nothing (EPERM), a device that does
// not exist or is not a file or block device (ENODEV, ENOTBLK).
constexpr int kExitNoKey = 2;
constexpr int kExitNoDevice = 4;

// The one Status -> exit mapping for library results: NoKey exits 2 with
// the library's message, anything else is a Failure (exit 1).
[[noreturn]] void throw_error(const blkcrypt::Error& e);
template <class T>
T expect(blkcrypt::Result<T> r) {
    if (!r) throw_error(r.error());
    return std::move(r).value();
}
inline void expect(blkcrypt::Result<void> r) {
    if (!r) throw_error(r.error());
}

// One action of a "blkcrypt CMD ACTION ..." command.
struct Action {
    std::string name;     // "encrypt"
    std::string summary;  // one line, for the man page
};

// What one command accepts. `hidden` holds the options that back positional
// arguments, so --help does not list them. The same tables make --help, the
// man pages and the bash completion (blkcrypt --generate-man), so they agree.
struct CommandLine {
    std::string usage;    // "blkcrypt hash --alg NAME [FILE...]"
    std::string summary;  // one sentence printed under the usage line
    po::options_description options{"Options"};
    po::options_description hidden;
    po::positional_options_description positional;
    std::vector<Action> actions;  // empty for commands without actions
    // Options that only some actions honour (long name -> those actions),
    // declared with only_for(); the others go with every action.
    std::map<std::string, std::vector<std::string>> scopes;
    // Other tools' spellings of our options ("--readonly" -> "--read-only"),
    // rewritten before parsing (add_cryptsetup_options fills it).
    std::map<std::string, std::string> aliases;
};

// Parses args against cl plus --help. Returns nullopt after printing the help
// (the command then exits 0); Boost's complaints become UsageError. An option
// given to an action outside its scope is a UsageError too (refused, never
// silently ignored).
std::optional<po::variables_map> parse_command_line(CommandLine& cl, Args args);

// Declares that `options` are honoured only by `actions` (cryptsetup's
// "allowed actions"); parse_command_line refuses them elsewhere.
void only_for(CommandLine& cl, const std::vector<std::string>& actions,
              const std::vector<std::string>& options);

// UsageError when an option of cl.scopes was given on the command line with
// an action outside its scope. parse_command_line calls it.
void check_action_options(const CommandLine& cl, const po::variables_map& vm, const std::string& action);

// True when the option was given on the command line (not just defaulted).
bool given(const po::variables_map& vm, const char* name);
// UsageError "--X: <why>" for the first of options that was given.
void refuse_given(const po::variables_map& vm, const std::vector<std::string>& options, const std::string& why);

// Commands of the form "blkcrypt CMD ACTION FILE...": declares the hidden
// positional options (and the actions, for help, man pages and completion),
// and reads them back after parsing.
void add_action_arguments(CommandLine& cl, std::vector<Action> actions = {});

// Describe mode (blkcrypt --generate-man): while a sink is set,
// parse_command_line copies the command's CommandLine into it and returns
// nullopt, so running a command only describes it.
// Returns the sink it replaces (a command may describe others while it is
// itself described: blkcrypt dump lists the options of the formats' commands).
std::optional<CommandLine>* set_describe_sink(std::optional<CommandLine>* sink) noexcept;
struct ActionArgs {
    std::string action;
    std::vector<std::string> files;
};
ActionArgs action_arguments(const po::variables_map& vm);

// True for --encrypt, false for --decrypt; exactly one must be given.
bool encrypt_requested(const po::variables_map& vm);

// Hex to bytes. `what` names the option in messages; the digits are never echoed.
blkcrypt::SecureBuffer decode_secret_hex(std::string_view hex, std::string_view what);
std::vector<uint8_t> decode_hex(std::string_view hex, std::string_view what);
std::string encode_hex(blkcrypt::ConstBytes bytes);

// The --iv for a transform with the given ivsize: required and exactly that
// long when ivsize > 0, absent when 0.
std::vector<uint8_t> iv_option(const po::variables_map& vm, std::size_t ivsize,
                               const std::string& driver);

// The message for a key the transform's setkey refused.
std::string key_rejected(const blkcrypt::AlgInfo& info, std::size_t keylen);

// The option "--driver NAME" (forces one implementation of --alg).
void add_driver_option(po::options_description& opts);
// What to allocate: --driver when given (checked to be a registered driver
// whose generic name is --alg), else --alg.
std::string name_to_alloc(blkcrypt::Registry& reg, const po::variables_map& vm);
// driver, after checking it is a driver name implementing alg (UsageError if not).
std::string checked_driver(blkcrypt::Registry& reg, const std::string& alg, const std::string& driver);

// Turns a failed alloc into the right exception: Failure when the name exists
// but its self-test failed (Status::SelftestFailed), UsageError (unknown
// algorithm, wrong type) otherwise.
[[noreturn]] void throw_alloc_error(const blkcrypt::Error& err);

// A file or stdin ("-") opened for reading.
class InputFile {
public:
    explicit InputFile(const std::string& path);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    // Fills as much of buf as possible; returns the bytes read, 0 at the end.
    std::size_t read(blkcrypt::Bytes buf);
    const std::string& display_name() const noexcept { return name_; }

private:
    int fd_;
    bool owned_;
    std::string name_;
};

// A file or stream whole; more than `limit` bytes is a usage error, so a huge
// or endless input (a signature, a certificate) is refused before it fills memory.
std::vector<uint8_t> read_all(const std::string& path, std::size_t limit = SIZE_MAX);

// "what: <strerror(errno)>".
std::string errno_message(const std::string& what);
// Writes all of data to fd (retrying short writes); Failure naming `name`.
void write_all(int fd, blkcrypt::ConstBytes data, const std::string& name);

// A hash name as veritysetup takes it, case-insensitively ("SHA256" ->
// "sha256"): registry names are all lower case, as the kernel's are.
std::string lowercase_hash_name(std::string name);

}  // namespace cli
