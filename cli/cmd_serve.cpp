// blkcrypt serve IMAGE: a plain image (file or block device) over NBD, the
// base of the target stack (crypt serve adds dm-crypt on top).
#include "commands.hpp"
#include "number_option.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/nbd/block_device.hpp>

namespace cli {

int run_serve(Args args) {
    CommandLine cl{"blkcrypt serve (--socket PATH | --port N) [--read-only] [--sector-size N] IMAGE",
                   "Serve the image file or block device IMAGE as a network block device (NBD)\n"
                   "for nbdcopy, nbdinfo, nbdfuse, qemu-img and qemu (docs/nbd.md). SIGINT or\n"
                   "SIGTERM finish the requests in flight, flush and exit 0."};
    cl.options.add_options()
        ("sector-size", number_value<unsigned>(512, 4096)->value_name("BYTES"),
         "the logical block size clients are told, 512..4096 (default: 512)")
        ("threads,t", threads_value()->value_name("N"), "I/O threads, at most 256 (default: one per core)")
        ("json", po::bool_switch(), "print events (listening, connections, request errors, shutdown) as JSON lines on stdout (docs/json.md)");
    add_serve_options(cl.options);
    cl.hidden.add_options()("image", po::value<std::vector<std::string>>(), "");
    cl.positional.add("image", -1);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto images = vm->count("image") ? (*vm)["image"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (images.size() != 1) throw UsageError("serve needs one IMAGE");
    blkcrypt::nbd::StoreDeviceOptions o;
    o.read_only = (*vm)["read-only"].as<bool>();
    if (vm->count("sector-size")) o.block_size = (*vm)["sector-size"].as<unsigned>();
    if (vm->count("threads")) o.threads = (*vm)["threads"].as<unsigned>();
    block_stop_signals();  // before the device's threads exist
    auto store = blkcrypt::open_file_store(images[0], !o.read_only);
    if (!store) throw Failure(store.error().message);
    auto dev = blkcrypt::nbd::make_store_device(*store, o);
    if (!dev) throw UsageError(images[0] + ": " + dev.error().message);
    return serve_device(*vm, *dev);
}

}  // namespace cli
