// blkcrypt bitlk: BitLocker volumes as cryptsetup's BITLK reads them, without
// root or device-mapper: `bitlk dump` is bitlkDump, `bitlk decrypt` writes
// what bitlkOpen maps (the same segments, read in userspace).
#include "commands.hpp"
#include "container_common.hpp"
#include "cryptsetup_options.hpp"
#include "image_copy.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bitlk/bitlk.hpp>
#include <blkcrypt/dm/bio_ring.hpp>

#include <algorithm>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace cli {
namespace {

namespace bitlk = blkcrypt::bitlk;

struct Image {
    std::string path;
    std::shared_ptr<blkcrypt::BackingStore> store;
    bitlk::Metadata md;
};

void warn(const std::string& msg) {
    std::cout.flush();
    std::cerr << "blkcrypt: warning: " << msg << "\n";
}

Image open_image(const std::string& path, bool writable = false) {
    auto s = open_container_image(path, writable);
    auto md = bitlk::read_metadata(registry(), *s);
    if (!md) throw Failure(md.error().message);
    // Where blkcrypt reads more than cryptsetup would, it says so.
    if (md->damaged_first)
        warn("the first FVE metadata block is damaged; using copy " + std::to_string(md->copy + 1) + " at offset " +
             std::to_string(md->metadata_offset[md->copy]));
    if (md->partial())
        warn(std::string(md->next_state == 1 ? "decryption" : "encryption") + " of this volume is paused: the " +
             std::to_string(md->volume_size) +
             " bytes from the start are decrypted, the rest is read as stored (cryptsetup refuses it)");
    return Image{path, s, std::move(md).value()};
}

bool has_clear_key(const bitlk::Metadata& md) {
    for (const bitlk::Vmk& v : md.vmks)
        if (v.protection == bitlk::kClearKey && !v.clear_key.empty()) return true;
    return false;
}

// The FVEK: from a clear-key protector when the volume has one (no secret
// needed; cryptsetup 2.6 cannot), else from the passphrase, recovery
// password or .BEK file read as cryptsetup reads a passphrase.
blkcrypt::SecureBuffer unlock(const po::variables_map& vm, const Image& im) {
    if (has_clear_key(im.md) && !vm.count("key-file")) return expect(bitlk::unlock_clear_key(registry(), im.md)).key;
    return unlock_with_tries<bitlk::Unlocked>(vm, im.path, [&](const blkcrypt::SecureBuffer& secret) {
               auto u = bitlk::unlock(registry(), im.md, secret);
               // cryptsetup's words whichever protector said no (a .BEK of another VMK, ...)
               if (!u && u.status() == blkcrypt::Status::NoKey)
                   return blkcrypt::Result<bitlk::Unlocked>(
                       blkcrypt::make_error(blkcrypt::Status::NoKey, "No key available with this passphrase."));
               return u;
           }).key;
}

std::string one_file(const std::vector<std::string>& files, const std::string& action) {
    if (files.size() != 1) throw UsageError("bitlk " + action + " needs exactly one IMAGE");
    return files[0];
}

int run_dump(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Image im = open_image(one_file(files, "dump"));
    if (!vm["dump-volume-key"].as<bool>()) {
        refuse_given(vm, {"key-file", "keyfile-offset", "keyfile-size"}, "only with --dump-volume-key");
        std::cout << bitlk::dump(im.md, im.path);
        return 0;
    }
    confirm_volume_key_dump(vm);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    const blkcrypt::SecureBuffer text = bitlk::dump_volume_key(im.md, im.path, key);
    std::cout.flush();
    write_all(STDOUT_FILENO, text, "stdout");
    return 0;
}

int run_test_passphrase(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Image im = open_image(one_file(files, "test-passphrase"));
    (void)unlock(vm, im);
    return 0;
}

// The table's plaintext into OUT line by line: zeros, stored bytes (linear),
// and each crypt line through a ring of 1 MiB bios converting while the
// oldest is written (as crypt decrypt's copy runs), not one bio at a time.
void write_view(const Image& im, blkcrypt::ConstBytes key, Output& out, unsigned threads) {
    constexpr std::size_t kChunk = 1 << 20;
    auto segs = bitlk::dm_table(im.md, key, im.store->size() / 512, im.path);
    if (!segs) throw Failure(segs.error().message);
    blkcrypt::dm::CryptTargetOptions opts;
    opts.threads = threads;
    const std::size_t depth = std::max<std::size_t>(8, 2 * std::size_t{threads});
    opts.queue_depth = depth;
    opts.max_request = kChunk;
    uint64_t total = 0;
    for (const blkcrypt::dm::DmLine& g : *segs) total += g.length * 512;
    out.reserve(total);
    std::vector<uint8_t> buf(kChunk);
    uint64_t written = 0;
    // In order, starting the writeback of what was written, as crypt
    // decrypt's copy does, so the final fsync waits for the tail only
    // (advice: an error here resurfaces at that fsync).
    auto emit = [&](blkcrypt::ConstBytes data) {
        out.write(data);
        if (out.seekable())
            (void)::sync_file_range(out.fd(), static_cast<off64_t>(written), static_cast<off64_t>(data.size()),
                                    SYNC_FILE_RANGE_WRITE);
        written += data.size();
    };
    auto failed = [&](uint64_t at, blkcrypt::Status s) {
        throw Failure(im.path + ": reading the plaintext at byte " + std::to_string(at) + ": " + blkcrypt::to_string(s));
    };
    for (const blkcrypt::dm::DmLine& g : *segs) {
        const uint64_t bytes = g.length * 512;
        const bool plain = g.target == "linear";
        if (!g.crypt) {  // zero or linear
            std::fill(buf.begin(), buf.end(), uint8_t{0});
            for (uint64_t at = 0; at < bytes;) {
                const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, bytes - at));
                const blkcrypt::Bytes chunk(buf.data(), n);
                if (plain)
                    if (blkcrypt::Status s = im.store->read(g.offset * 512 + at, chunk); s != blkcrypt::Status::Ok)
                        failed(g.start * 512 + at, s);
                emit(chunk);
                at += n;
            }
            continue;
        }
        auto target = make_crypt_target(registry(), *g.crypt, im.store, g.length, opts);
        blkcrypt::dm::BioRing ring(*target, depth, kChunk, [&](const blkcrypt::dm::RetiredBio& r) {
            if (r.status != blkcrypt::Status::Ok) failed((g.start + r.sector) * 512, r.status);
            emit(r.data);
            return blkcrypt::Status::Ok;
        });
        for (uint64_t at = 0; at < bytes;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, bytes - at));
            if (blkcrypt::Status s = ring.reserve(); s != blkcrypt::Status::Ok) failed(g.start * 512 + at, s);
            if (blkcrypt::Status s = ring.submit(at / 512, blkcrypt::dm::BioDir::Read, ring.next_buffer().first(n));
                s != blkcrypt::Status::Ok)
                failed(g.start * 512 + at, s);
            at += n;
        }
        if (blkcrypt::Status s = ring.finish(); s != blkcrypt::Status::Ok) failed(g.start * 512, s);
    }
}

int run_decrypt(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("bitlk decrypt needs IMAGE and OUT");
    const std::string& image = files[0];
    const std::string key_path = vm.count("key-file") ? vm["key-file"].as<std::string>() : "";
    Output out(files[1], OutputOptions{.role = "OUT", .secret = true, .can_stream = true,
                                       .in_place = vm["in-place"].as<bool>(),
                                       .inputs = {{"IMAGE", image}, {"the key file", key_path}}});
    const Image im = open_image(image);
    // Refuse what bitlkOpen refuses before asking for a secret.
    auto segs = bitlk::dm_table(im.md, {}, im.store->size() / 512, im.path);
    if (!segs) throw Failure(segs.error().message);
    uint64_t total = 0;
    for (const blkcrypt::dm::DmLine& g : *segs) total += g.length * 512;
    // A new file's allocation (for 1 GiB on tmpfs, 0.2 s of kernel time) runs
    // on another core while the passphrase is stretched. Only for the
    // temporary file, which a failed unlock removes: --in-place must be left
    // as it was. The future's destructor waits for it on any exit.
    std::future<void> room;
    if (out.kind() == Output::Kind::Temp) room = std::async(std::launch::async, [&out, total] { out.reserve(total); });
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    if (room.valid()) room.get();  // its Failure (a full disk), if any
    write_view(im, key, out, vm.count("threads") ? vm["threads"].as<unsigned>() : 0);
    out.commit();
    return 0;
}

// The plaintext over NBD, read-write unless --read-only, as bitlkOpen maps
// it: each segment a device of its own, back to back (dm-zero over the
// metadata areas drops writes, the boot region and the rest are dm-crypt, a
// paused conversion's tail is linear), so a write lands encrypted in place.
int run_serve(const po::variables_map& vm, const std::vector<std::string>& files) {
    const bool read_only = vm["read-only"].as<bool>();
    const Image im = open_image(one_file(files, "serve"), !read_only);
    if (auto segs = bitlk::dm_table(im.md, {}, im.store->size() / 512, im.path); !segs)
        throw Failure(segs.error().message);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    block_stop_signals();  // before the targets' and the device's threads exist
    auto table = bitlk::dm_table(im.md, key, im.store->size() / 512, im.path);
    if (!table) throw Failure(table.error().message);
    return serve_table(vm, *table, im.store, {.description = "bitlk " + im.path, .what_failed = im.path + ": "});
}

// bitlk table: the dm table bitlkOpen loads, keys hidden unless --show-key.
int run_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    const Image im = open_image(one_file(files, "table"));
    if (auto segs = bitlk::dm_table(im.md, {}, im.store->size() / 512, im.path); !segs)
        throw Failure(segs.error().message);
    const blkcrypt::SecureBuffer key = unlock(vm, im);
    return print_table(vm, bitlk::dm_table(im.md, key, im.store->size() / 512, im.path));
}

}  // namespace

int run_bitlk(Args args) {
    CommandLine cl{"blkcrypt bitlk dump|test-passphrase [OPTIONS] IMAGE\n"
                   "       blkcrypt bitlk decrypt [OPTIONS] IMAGE OUT\n"
                   "       blkcrypt bitlk serve (--socket PATH | --port N) [OPTIONS] IMAGE\n"
                   "       blkcrypt bitlk table [OPTIONS] [--show-key] IMAGE",
                   "BitLocker volumes (also To Go) as cryptsetup's BITLK reads them, without root\n"
                   "or device-mapper: dump is bitlkDump, decrypt writes the plaintext bitlkOpen\n"
                   "maps, serve exports it over NBD (docs/nbd.md), read-write unless --read-only.\n"
                   "The secret is a passphrase or a 48-digit recovery password (prompted for on a\n"
                   "terminal, --tries times, else one line of stdin), or --key-file: a .BEK\n"
                   "startup key or a file holding the passphrase. A volume with a clear key\n"
                   "(suspended protection) opens without one. A secret that opens nothing exits 2\n"
                   "(\"No key available with this passphrase.\"). OUT follows the output policy\n"
                   "(docs/outputs.md). IMAGE must be a regular file or a block device."};
    cl.options.add_options()
        ("key-file,d", po::value<std::string>()->value_name("FILE"), "read the secret from FILE ('-': all of stdin), e.g. a .BEK")
        ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
        ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"), "read exactly BYTES of the key file")
        ("dump-volume-key", po::bool_switch(), "dump: also print the volume key (asks for the secret, and to confirm)")
        ("show-key", po::bool_switch(), "table: print the key (dmsetup table --showkeys) instead of zeros")
        ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
        ("in-place", po::bool_switch(), "write into the existing regular file OUT directly");
    add_batch_mode_option(cl.options);
    add_tries_option(cl.options);
    add_serve_options(cl.options);
    add_action_arguments(cl, {{"dump", "print the metadata as cryptsetup bitlkDump does"},
                              {"test-passphrase", "check a secret (cryptsetup bitlkOpen --test-passphrase)"},
                              {"decrypt", "write the plaintext cryptsetup bitlkOpen maps to OUT"},
                              {"serve", "serve that plaintext over NBD, read-write unless --read-only"},
                              {"table", "print the dm table cryptsetup bitlkOpen loads"}});
    only_for(cl, {"dump"}, {"dump-volume-key", "batch-mode"});
    only_for(cl, {"table"}, {"show-key"});
    only_for(cl, {"decrypt", "serve"}, {"threads"});
    only_for(cl, {"decrypt"}, {"in-place"});
    only_for(cl, {"serve"}, serve_option_names());
    add_cryptsetup_options(cl, "bitlk");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "dump") return run_dump(*vm, files);
    if (action == "test-passphrase") return run_test_passphrase(*vm, files);
    if (action == "decrypt") return run_decrypt(*vm, files);
    if (action == "serve") return run_serve(*vm, files);
    if (action == "table") return run_table(*vm, files);
    throw UsageError("unknown action '" + action + "': use dump, test-passphrase, decrypt, serve or table");
}

}  // namespace cli
