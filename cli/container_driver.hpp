// One command line for every container format (bitlk, fvault2, loopaes,
// luks, tcrypt): the shared options are declared once and dump, test-passphrase,
// decrypt, serve and table run the same way for all of them. A format is a
// ContainerFormat entry: its texts, its own options, and how to open IMAGE
// into an OpenedContainer that can unlock and give its dm table, and the
// actions of its own (luks format, loopaes encrypt) with their runners.
#pragma once

#include "common.hpp"
#include "output_file.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cli {

// IMAGE once opened (metadata read), before and after unlock().
class OpenedContainer {
public:
    OpenedContainer(std::string path, std::shared_ptr<blkcrypt::BackingStore> store)
        : path(std::move(path)), store(std::move(store)) {}
    virtual ~OpenedContainer() = default;

    const std::string path;                               // IMAGE, as the user named it
    const std::shared_ptr<blkcrypt::BackingStore> store;  // the device the table's lines read

    // Asks for the secret (--tries times at a terminal); a wrong one exits 2.
    virtual void unlock(const po::variables_map& vm) = 0;
    // test-passphrase: unlock() unless the format tests differently (luks
    // ignores LUKS2 requirements and names the keyslot with --verbose).
    virtual void test_passphrase(const po::variables_map& vm) { unlock(vm); }
    // The dm table `cryptsetup open` loads. Before unlock() (formats with
    // ContainerFormat::precheck) the table with an empty key: what the
    // activation refuses, refused before the secret is asked for.
    virtual blkcrypt::Result<blkcrypt::dm::DmTable> table() const = 0;
    // The tables table()'s lines stack on, loaded first, as (NAME, table
    // text as dmsetup prints it): LUKS2 --integrity's NAME_dif under the
    // crypt table, which names it /dev/mapper/NAME_dif. None for most formats.
    struct NamedTable {
        std::string name, text;
    };
    virtual blkcrypt::Result<std::vector<NamedTable>> lower_tables() const { return std::vector<NamedTable>{}; }
    // The name the top table gets beside lower tables (dmsetup's NAME).
    virtual std::string mapping_name() const { return ""; }
    // What dump prints; the volume-key dump after unlock().
    virtual std::string dump() const = 0;
    virtual blkcrypt::SecureBuffer dump_volume_key() const = 0;
    // How serve names and builds the device.
    virtual TableDevice serve_how(const blkcrypt::dm::DmTable& table) const = 0;
};

// An action a format has beside the driver's (or instead of one of them:
// luks decrypt takes --start/--size), with its usage line and its runner
// (the exit status).
struct OwnAction {
    Action action;
    std::string usage;  // "encrypt [OPTIONS] IN OUT"; empty: none of its own
    int (*run)(const po::variables_map& vm, const std::vector<std::string>& files) = nullptr;
};

struct ContainerFormat {
    std::string name;     // "fvault2": the command and its messages
    std::string summary;  // what the help says under the usage lines
    // Its actions in the order help lists them: the driver's (dump,
    // test-passphrase, decrypt, serve, table) and those in `own`.
    std::vector<std::string> actions;
    // Non-empty: the usage lines as given, instead of the ones built from `actions`.
    std::string usage;
    // cryptsetup's names in the actions' help: "bitlkOpen", "bitlkDump".
    std::string open_name, dump_name;
    std::string usage_options = "[OPTIONS]";  // loopaes: "[OPTIONS] --key-file FILE"
    // Non-empty: --key-file FILE (with --keyfile-offset, --keyfile-size) is
    // declared with this help; empty: the format declares its own.
    std::string key_file_help;
    // The secret is a passphrase: --passphrase-file, --tries, -q.
    bool passphrase = true;
    std::string dump_volume_key_help;
    bool precheck = false;           // table() works before unlock()
    bool dump_needs_secret = false;  // dump unlocks first (tcrypt: the header is encrypted)
    // Its own options (and their only_for scopes), declared before the shared
    // ones. The shared ones go with the driver's actions: a scope that adds
    // an own action (loopaes encrypt --key-file) is declared here.
    void (*add_options)(CommandLine& cl) = nullptr;
    std::unique_ptr<OpenedContainer> (*open)(const po::variables_map& vm, const std::string& image,
                                             bool writable) = nullptr;
    // Inputs besides IMAGE and the shared key files that OUT must not be.
    void (*add_inputs)(const po::variables_map& vm, std::vector<NamedPath>& inputs) = nullptr;
    std::vector<OwnAction> own;
};

// ContainerFormat::open for a container constructed from (IMAGE, writable).
template <class C>
std::unique_ptr<OpenedContainer> open_as(const po::variables_map&, const std::string& image, bool writable) {
    return std::make_unique<C>(image, writable);
}

// Declares the format's command line, parses args and runs the action.
int run_container(const ContainerFormat& format, Args args);

// The format named `name` (bitlk, fvault2, loopaes, luks, tcrypt), or nullptr.
const ContainerFormat* find_container_format(std::string_view name);

// The formats' entries (their cmd_FORMAT.cpp).
extern const ContainerFormat kBitlkFormat, kFvault2Format, kLoopaesFormat, kLuksFormat, kTcryptFormat;

}  // namespace cli
