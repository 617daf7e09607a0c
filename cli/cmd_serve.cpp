// blkcrypt serve IMAGE: an image (file or block device) over NBD as it is,
// the base of the target stack (crypt serve adds dm-crypt on top), unless
// its signature or --type names a container format (detect.hpp); serve
// --dm-table: a stack of device-mapper tables, as dmsetup would load them.
#include "commands.hpp"
#include "detect.hpp"
#include "number_option.hpp"
#include "passphrase.hpp"
#include "serve.hpp"
#include "verity_actions.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/dm_table.hpp>

#include <iostream>
#include <map>
#include <mutex>

namespace cli {
namespace {

constexpr std::string_view kMapper = "/dev/mapper/";

// "NAME=FILE" names a table (later tables use it as /dev/mapper/NAME); a
// plain FILE, or a prefix with '/' in it, is only a file.
std::pair<std::string, std::string> split_table_spec(const std::string& spec) {
    const std::size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || spec.substr(0, eq).find('/') != std::string::npos) return {"", spec};
    return {spec.substr(0, eq), spec.substr(eq + 1)};
}

// The tables in the order given, each over files, block devices and the
// tables before it; the last one is served.
std::shared_ptr<blkcrypt::dm::BlockDevice> build_tables(const std::vector<std::string>& specs, bool read_only,
                                                         unsigned threads) {
    std::map<std::string, std::shared_ptr<blkcrypt::dm::BlockDevice>> names;
    std::shared_ptr<blkcrypt::dm::BlockDevice> last;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const auto [name, file] = split_table_spec(specs[i]);
        if (name.empty() && i + 1 != specs.size())
            throw UsageError("--dm-table " + file + ": only the last table may be unnamed (NAME=FILE names one)");
        if (names.count(name)) throw UsageError("--dm-table: the name '" + name + "' is given twice");
        // The table holds crypt keys: read as a key file is, into secure memory.
        const blkcrypt::SecureBuffer text = read_key_input(file, 0, 0, false);
        auto lines = blkcrypt::dm::parse_dm_table(
            std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
        if (!lines) throw UsageError(file + ": " + lines.error().message);
        blkcrypt::dm::DmBuildOptions o;
        o.read_only = read_only;
        o.threads = threads;
        o.description = "dm table " + (name.empty() ? file : name);
        o.named = [&](const std::string& dev) -> std::shared_ptr<blkcrypt::dm::BlockDevice> {
            if (dev.compare(0, kMapper.size(), kMapper) != 0) return nullptr;
            auto it = names.find(dev.substr(kMapper.size()));
            return it == names.end() ? nullptr : it->second;
        };
        o.open = [](const std::string& path, bool writable) { return blkcrypt::open_store(path, writable); };
        o.on_corruption = [](const blkcrypt::verity::Corruption& c) {
            static std::mutex mu;
            std::lock_guard lk(mu);
            std::cerr << "blkcrypt: " << describe(c) << "\n";
        };
        auto dev = blkcrypt::dm::build_dm_table(registry(), *lines, o);
        if (!dev) {
            if (dev.status() == blkcrypt::Status::Invalid) throw UsageError(file + ": " + dev.error().message);
            throw Failure(file + ": " + dev.error().message);
        }
        last = *dev;
        if (!name.empty()) names[name] = last;
    }
    return last;
}

}  // namespace

CommandLine serve_command_line() {
    CommandLine cl{"blkcrypt serve (--socket PATH | --port N) [--read-only] [--type TYPE] [OPTIONS] IMAGE\n"
                   "       blkcrypt serve (--socket PATH | --port N) [--read-only] --dm-table [NAME=]FILE...",
                   "Serve IMAGE (a file, a block device, or the export of another NBD server\n"
                   "given as an nbd:// URI, docs/remote.md) as a network block device (NBD) for\n"
                   "nbdcopy, nbdinfo, nbdfuse, qemu-img and qemu (docs/nbd.md). SIGINT or SIGTERM\n"
                   "finish the requests in flight, flush and exit 0. An image with a LUKS,\n"
                   "BitLocker or FileVault 2 signature is unlocked and its plaintext served, as\n"
                   "`blkcrypt FORMAT serve` does with the same options (so is any image --type\n"
                   "names); any other image, or --type raw, is served as it is. --dm-table serves\n"
                   "a dmsetup table file (linear, zero, error, crypt, verity) instead; NAME=FILE\n"
                   "names a table that later ones use as /dev/mapper/NAME; the last is served."};
    cl.options.add_options()
        ("type,M", po::value<std::string>()->value_name(type_value_name(true)),
         "the format, as cryptsetup open --type names it (luks1/luks2 must match the header); raw: the "
         "image's bytes as they are (the default without a signature)")
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"),
         "raw: the logical block size clients are told, 512..4096 (default: 512)")
        ("dm-table", po::value<std::vector<std::string>>()->value_name("[NAME=]FILE"),
         "a device-mapper table to serve (repeatable: stacked, the last one served)")
        ("threads,t", threads_value()->value_name("N"), "I/O threads, at most 256 (default: one per core)")
        ("json", po::bool_switch(), "print events (listening, connections, request errors, shutdown) as JSON lines on stdout (docs/json.md)");
    add_serve_options(cl.options);
    cl.hidden.add_options()("image", po::value<std::vector<std::string>>(), "");
    cl.positional.add("image", -1);
    return cl;
}

int run_serve(Args args) {
    CommandLine cl = serve_command_line();
    // A container is served by its format's command; what comes back here is raw.
    if (const Routed r = route_serve(args, cl.options); r.status) return *r.status;
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto images = vm->count("image") ? (*vm)["image"].as<std::vector<std::string>>() : std::vector<std::string>{};
    const bool read_only = (*vm)["read-only"].as<bool>();
    const unsigned threads = vm->count("threads") ? (*vm)["threads"].as<unsigned>() : 0;
    if (vm->count("dm-table")) {
        if (!images.empty()) throw UsageError("serve --dm-table takes no IMAGE (the table names its devices)");
        if (vm->count("sector-size")) throw UsageError("--sector-size is not for --dm-table (the targets give it)");
        block_stop_signals();  // before the devices' threads exist
        return serve_device(*vm, build_tables((*vm)["dm-table"].as<std::vector<std::string>>(), read_only, threads));
    }
    if (images.size() != 1) throw UsageError("serve needs one IMAGE");
    blkcrypt::dm::StoreDeviceOptions o;
    o.read_only = read_only;
    o.discard = !read_only;  // TRIM punches a hole in the file (reads zeros)
    if (vm->count("sector-size")) o.block_size = (*vm)["sector-size"].as<unsigned>();
    o.threads = threads;
    block_stop_signals();  // before the device's threads exist
    auto store = blkcrypt::open_store(images[0], !o.read_only);
    if (!store) throw Failure(store.error().message);
    auto dev = blkcrypt::dm::make_store_device(*store, o);
    if (!dev) throw UsageError(dev.error().message);  // it names the image
    return serve_device(*vm, *dev);
}

}  // namespace cli
