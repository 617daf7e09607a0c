// blkcrypt integrity: dm-integrity devices as integritysetup makes and opens
// them, without root or device-mapper (docs/integrity.md).
//
// format writes IMAGE in place, as integritysetup formats a device (it is
// the device, not an output), but computes the tags of zeros instead of
// writing zeros through the mapping; the superblock goes last, so an
// interrupted format leaves no superblock. read, verify and serve read
// through the target with every block checked; write writes through it.
#include "commands.hpp"
#include "container_common.hpp"
#include "image_copy.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "passphrase.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "serve.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/targets.hpp>
#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/integrity/format.hpp>
#include <blkcrypt/integrity/journal_crypt.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/integrity/tag_hash.hpp>

#include <algorithm>
#include <array>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace cli {
namespace {

namespace integrity = blkcrypt::integrity;
using Store = std::shared_ptr<blkcrypt::BackingStore>;

constexpr unsigned kMaxKeySize = 4096;

// The target's messages name the device already; others get its name.
std::string named(const std::string& path, const std::string& message) {
    return message.starts_with(path) ? message : path + ": " + message;
}  // integritysetup's MAX_KEY_SIZE (bytes)

void add_integrity_options(po::options_description& o) {
    o.add_options()
        ("integrity,I", po::value<std::string>()->value_name("ALG"),
         "data integrity algorithm: crc32c (default), crc32, sha1, sha256, sha512, hmac-sha256, hmac-sha512...")
        ("integrity-key-file", po::value<std::string>()->value_name("FILE"), "read the integrity key (hmac) from FILE")
        ("integrity-key-size", number_value<unsigned>(1, kMaxKeySize)->value_name("BYTES"),
         "the size of the integrity key, in bytes (integritysetup calls it BITS but reads bytes)")
        ("data-device", po::value<std::string>()->value_name("DATA"),
         "data on DATA, superblock, journal and tags on IMAGE (the metadata device)")
        ("tag-size,t", number_value<unsigned>(1, 424)->value_name("BYTES"),
         "format: tag bytes per sector (default: the digest size)")
        ("sector-size,s", number_value<unsigned>(512, 4096)->value_name("BYTES"),
         "format: block size, 512 to 4096, a power of two (default 512)")
        ("interleave-sectors", number_value<uint32_t>(1, UINT32_MAX)->value_name("SECTORS"),
         "format: data sectors between tag runs (default 32768)")
        ("journal-size,j", bytes_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"),
         "format: journal size (default: 1/128 of the device, at most 64 MiB)")
        ("buffer-sectors", number_value<uint32_t>(1, UINT32_MAX)->value_name("SECTORS"),
         "the kernel's buffer size (shapes the tag area of a metadata device)")
        ("bitmap-sectors-per-bit", number_value<uint64_t>(1, UINT64_MAX)->value_name("N"),
         "format: 512-byte sectors per bitmap bit (default 32768)")
        ("journal-integrity", po::value<std::string>()->value_name("ALG"),
         "journal MAC (hmac-sha256, sha256...): format writes it, the others need it for an image made with one")
        ("journal-integrity-key-file", po::value<std::string>()->value_name("FILE"), "journal MAC key file")
        ("journal-integrity-key-size", number_value<unsigned>(1, kMaxKeySize)->value_name("BYTES"),
         "journal MAC key size")
        ("journal-crypt", po::value<std::string>()->value_name("ALG"), "journal encryption (ctr-aes, chacha20, cbc-aes...): format writes it, the others need it for an image made with one")
        ("journal-crypt-key-file", po::value<std::string>()->value_name("FILE"), "journal encryption key file")
        ("journal-crypt-key-size", number_value<unsigned>(1, kMaxKeySize)->value_name("BYTES"),
         "journal encryption key size")
        ("integrity-no-journal,D", po::bool_switch(), "direct mode (D): no journal")
        ("integrity-bitmap-mode,B", po::bool_switch(), "bitmap mode (B): a bitmap of changed regions, no journal")
        ("integrity-recovery-mode,R", po::bool_switch(), "recovery mode (R): read without tag checks, read-only")
        ("integrity-legacy-padding", po::bool_switch(), "accepted as integritysetup 2.6.1 does: its format keeps fix_padding all the same")
        ("integrity-legacy-hmac", po::bool_switch(), "format: no salt in the tags (no fix_hmac)")
        ("no-wipe", po::bool_switch(), "format: leave the tags as the device holds them (every block then fails to read)")
        ("journal-watermark", number_value<unsigned>(0, 100)->value_name("PERCENT"),
         "accepted: the kernel's journal flush point (no effect here)")
        ("journal-commit-time", number_value<unsigned>(0, UINT32_MAX)->value_name("MS"),
         "J mode: commit waiting writes every MS milliseconds, as the kernel's commit_time (default 10000; 0: "
         "only at flush and close)")
        ("bitmap-flush-time", number_value<unsigned>(0, UINT32_MAX)->value_name("MS"),
         "accepted: the kernel's bitmap flush interval (no effect here)")
        ("allow-discards", po::bool_switch(), "serve: take TRIM as the kernel's discard (tags all 0xF6, data punched out); all: read such blocks unchecked")
        ("threads", threads_value()->default_value(0)->value_name("N"), "worker threads (0: one per core)")
        ("max-errors", number_value<uint64_t>(0, UINT64_MAX)->default_value(20)->value_name("N"),
         "verify: name at most N bad sectors (0: all)");
    add_batch_mode_option(o);
}

// The key of -I hmac-*: --integrity-key-file and --integrity-key-size
// together, as integritysetup wants them.
blkcrypt::SecureBuffer integrity_key(const po::variables_map& vm) {
    const bool file = vm.count("integrity-key-file") > 0, size = vm.count("integrity-key-size") > 0;
    if (file != size) throw UsageError("Both key file and key size options must be specified.");
    if (!file) return {};
    return read_key_input(vm["integrity-key-file"].as<std::string>(), 0, vm["integrity-key-size"].as<unsigned>(),
                          false);
}

std::string hash_option(const po::variables_map& vm) {
    return integrity::kernel_hash_name(vm.count("integrity") ? vm["integrity"].as<std::string>() : "crc32c");
}

// --journal-crypt-key-file and --journal-crypt-key-size, together, as
// integritysetup wants them.
blkcrypt::SecureBuffer journal_crypt_key(const po::variables_map& vm) {
    const bool file = vm.count("journal-crypt-key-file") > 0, size = vm.count("journal-crypt-key-size") > 0;
    if (file != size) throw UsageError("Both journal encryption key file and key size options must be specified.");
    if (!file) {
        if (vm.count("journal-crypt")) throw UsageError("--journal-crypt needs --journal-crypt-key-file");
        return {};
    }
    if (!vm.count("journal-crypt")) throw UsageError("--journal-crypt-key-file needs --journal-crypt");
    return read_key_input(vm["journal-crypt-key-file"].as<std::string>(), 0, vm["journal-crypt-key-size"].as<unsigned>(),
                          false);
}

// --journal-integrity-key-file and --journal-integrity-key-size, together.
blkcrypt::SecureBuffer journal_mac_key(const po::variables_map& vm) {
    const bool file = vm.count("journal-integrity-key-file") > 0, size = vm.count("journal-integrity-key-size") > 0;
    if (file != size) throw UsageError("Both journal integrity key file and key size options must be specified.");
    if (!file) return {};
    if (!vm.count("journal-integrity")) throw UsageError("--journal-integrity-key-file needs --journal-integrity");
    return read_key_input(vm["journal-integrity-key-file"].as<std::string>(), 0,
                          vm["journal-integrity-key-size"].as<unsigned>(), false);
}

char mode_option(const po::variables_map& vm) {
    const int n = vm["integrity-no-journal"].as<bool>() + vm["integrity-bitmap-mode"].as<bool>() +
                  vm["integrity-recovery-mode"].as<bool>();
    if (n > 1) throw UsageError("give one of -D, -B and -R");
    if (vm["integrity-no-journal"].as<bool>()) return 'D';
    if (vm["integrity-bitmap-mode"].as<bool>()) return 'B';
    if (vm["integrity-recovery-mode"].as<bool>()) return 'R';
    return 'J';
}

// --- format -------------------------------------------------------------------

int run_format(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("integrity format needs exactly one IMAGE");
    const std::string& image_path = files[0];
    if (vm["integrity-recovery-mode"].as<bool>()) throw UsageError("-R: recovery mode is for reading, not format");
    const std::optional<std::string> data_path =
        vm.count("data-device") ? std::optional(vm["data-device"].as<std::string>()) : std::nullopt;
    if (data_path && same_file(*data_path, image_path))
        throw UsageError("--data-device is IMAGE itself: give a separate device or no --data-device");

    integrity::FormatOptions o;
    o.internal_hash = hash_option(vm);
    const blkcrypt::SecureBuffer key = integrity_key(vm);
    o.key = key;
    const blkcrypt::SecureBuffer jkey = journal_mac_key(vm);
    if (vm.count("journal-integrity")) {
        o.journal_mac = integrity::kernel_hash_name(vm["journal-integrity"].as<std::string>());
        o.journal_mac_key = jkey;
    }
    const blkcrypt::SecureBuffer ckey = journal_crypt_key(vm);
    if (vm.count("journal-crypt")) {
        o.journal_crypt = integrity::journal_crypt_kernel_name(vm["journal-crypt"].as<std::string>());
        o.journal_crypt_key = ckey;
    }
    auto& p = o.params;
    blkcrypt::Registry& reg = registry();
    p.tag_size = vm.count("tag-size") ? static_cast<uint16_t>(vm["tag-size"].as<unsigned>()) : 0;  // 0: the digest size
    if (vm.count("sector-size")) p.sector_size = vm["sector-size"].as<unsigned>();
    if (vm.count("interleave-sectors")) p.interleave_sectors = vm["interleave-sectors"].as<uint32_t>();
    if (vm.count("journal-size")) {
        const uint64_t sectors = vm["journal-size"].as<uint64_t>() / integrity::kSectorSize;
        if (sectors > UINT32_MAX) throw UsageError("--journal-size is too large");
        p.journal_sectors = static_cast<uint32_t>(sectors);
    }
    if (vm.count("bitmap-sectors-per-bit")) p.sectors_per_bit = vm["bitmap-sectors-per-bit"].as<uint64_t>();
    p.mode = mode_option(vm);
    // integritysetup 2.6.1 formats with fix_padding even with
    // --integrity-legacy-padding (recorded on its kernel: tests/golden/integrity/legacy-*).
    p.fix_padding = true;
    p.fix_hmac = !vm["integrity-legacy-hmac"].as<bool>();
    o.compute_tags = !vm["no-wipe"].as<bool>();
    o.threads = vm["threads"].as<unsigned>();
    if (vm.count("buffer-sectors")) o.buffer_sectors = vm["buffer-sectors"].as<uint32_t>();

    Store image = open_container_image(image_path, true);
    Store data = data_path ? open_container_image(*data_path, true, "--data-device") : nullptr;

    std::string question = "\nWARNING!\n========\nThis will overwrite data on " + image_path;
    if (data_path && o.compute_tags)
        question += " and " + *data_path +
                    " irrevocably.\nTo preserve data device use --no-wipe option (and then activate with "
                    "--integrity-recalculate).\n";
    else
        question += " irrevocably.\n";
    yes_dialog(vm, question);

    const uint64_t total = (data ? data->size() : image->size());
    Progress progress(progress_settings(vm), image_path, total);
    o.progress = [&progress](uint64_t done, uint64_t) {
        progress.update(done);
        return true;  // a signal ends the process from its handler
    };
    auto f = integrity::format(reg, *image, data.get(), o);
    if (!f) {
        if (f.status() == blkcrypt::Status::Invalid || f.status() == blkcrypt::Status::NotFound)
            throw UsageError("Cannot format integrity for device " + named(image_path, f.error().message));
        throw Failure("Cannot format integrity for device " + named(image_path, f.error().message));
    }
    if (o.compute_tags) progress.finish();
    if (!vm["batch-mode"].as<bool>())
        std::cout << "Formatted with tag size " << f->superblock.tag_size << ", internal integrity "
                  << o.internal_hash << ".\n";
    return 0;
}

// --- opening the target -------------------------------------------------------

struct Opened {
    std::shared_ptr<integrity::IntegrityTarget> target;
    std::string image;
};

Opened open_target(const po::variables_map& vm, const std::string& image_path, bool writable) {
    integrity::OpenOptions o;
    o.journal_crypt_key = journal_crypt_key(vm);
    if (vm.count("journal-crypt"))
        o.journal_crypt = integrity::journal_crypt_kernel_name(vm["journal-crypt"].as<std::string>());
    o.journal_mac_key = journal_mac_key(vm);
    if (vm.count("journal-integrity"))
        o.journal_mac = integrity::kernel_hash_name(vm["journal-integrity"].as<std::string>());
    o.mode = mode_option(vm);
    if (o.mode == 'R' && writable) throw UsageError("-R: recovery mode is read-only");
    o.internal_hash = hash_option(vm);
    o.internal_hash_key = integrity_key(vm);
    o.allow_discards = vm["allow-discards"].as<bool>();
    if (vm.count("journal-commit-time")) o.commit_time = vm["journal-commit-time"].as<unsigned>();
    o.read_only = !writable;
    if (vm.count("buffer-sectors")) o.buffer_sectors = vm["buffer-sectors"].as<uint32_t>();
    if (vm.count("bitmap-sectors-per-bit")) o.sectors_per_bit = vm["bitmap-sectors-per-bit"].as<uint64_t>();
    Store image = open_container_image(image_path, writable);
    Store data;
    if (vm.count("data-device")) {
        const std::string dp = vm["data-device"].as<std::string>();
        if (same_file(dp, image_path)) throw UsageError("--data-device is IMAGE itself");
        data = open_container_image(dp, writable, "--data-device");
    }
    auto t = data ? integrity::IntegrityTarget::open(registry(), data, image, o)
                  : integrity::IntegrityTarget::open(registry(), image, nullptr, o);
    if (!t) {
        if (t.status() == blkcrypt::Status::NotFound)
            throw Failure("Device " + image_path + " is not a valid INTEGRITY device.");
        if (t.status() == blkcrypt::Status::Invalid) throw UsageError(named(image_path, t.error().message));
        throw Failure(named(image_path, t.error().message));
    }
    // integritysetup open maps the superblock's provided_data_sectors; the
    // kernel refuses that table on a device that shrank since the format
    // (what the device now holds is fewer sectors).
    const uint64_t mapped = (*t)->superblock().provided_data_sectors;
    if ((*t)->geometry().provided_data_sectors < mapped)
        throw Failure(image_path + ": Not enough provided sectors for requested mapping size (the superblock maps " +
                      std::to_string(mapped) + " sectors, the device now holds " +
                      std::to_string((*t)->geometry().provided_data_sectors) + ": was it truncated?)");
    return {std::move(t).value(), image_path};
}

// Reads [pos, pos+n) through the target: checked, or raw in mode R.
blkcrypt::Result<void> read_blocks(integrity::IntegrityTarget& t, uint64_t pos, blkcrypt::Bytes buf) {
    if (t.mode() == 'R') {
        std::vector<uint8_t> tags(buf.size() / t.block_size() * t.tag_size());
        return t.read(pos, buf, tags);
    }
    return t.read_checked(pos, buf);
}

constexpr uint64_t kChunk = 1 << 20;

// The checked target as a block device for the shared ring (copy_device):
// its reads check, its writes hash, on the device's I/O threads, several
// 1 MiB requests at once. The engine's status names no sector: a request
// that failed is done again here for the target's own words.
std::shared_ptr<blkcrypt::dm::BlockDevice> ring_device(const po::variables_map& vm, const Opened& o) {
    auto dev = blkcrypt::dm::make_integrity_device(o.target, vm["threads"].as<unsigned>(), nullptr);
    if (!dev) throw Failure(named(o.image, dev.error().message));
    return *dev;
}

// --- read ---------------------------------------------------------------------

int run_read(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("integrity read takes IMAGE and OUT");
    std::vector<NamedPath> inputs = {{"IMAGE", files[0]}};
    if (vm.count("data-device")) inputs.push_back({"--data-device", vm["data-device"].as<std::string>()});
    if (vm.count("integrity-key-file")) inputs.push_back({"--integrity-key-file", vm["integrity-key-file"].as<std::string>()});
    // The device's data, as private as a plaintext (a new OUT is 0600).
    Output out(files[1], OutputOptions{.role = "OUT", .secret = true, .can_stream = true, .inputs = inputs});
    Opened o = open_target(vm, files[0], false);
    auto& t = *o.target;
    auto dev = ring_device(vm, o);
    auto failed = [&](uint64_t at, std::size_t len, blkcrypt::Status st) {
        std::vector<uint8_t> again(std::max<std::size_t>(len, t.block_size()));
        if (auto r = read_blocks(t, at, blkcrypt::Bytes(again).first(len ? len : t.block_size())); !r)
            throw Failure(named(files[0], r.error().message));
        throw Failure(files[0] + ": reading at byte " + std::to_string(at) + ": " + blkcrypt::to_string(st));
    };
    copy_device({.device = *dev, .bytes = t.size(), .out = &out, .failed = failed, .name = files[0],
                 .threads = vm["threads"].as<unsigned>(), .progress = progress_settings(vm)});
    dev.reset();
    out.commit();
    return 0;
}

// --- write --------------------------------------------------------------------

int run_write(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("integrity write takes IN and IMAGE");
    const std::string& in_path = files[0];
    const std::string& image_path = files[1];
    if (in_path != "-" && same_file(in_path, image_path)) throw UsageError("IN is IMAGE itself");
    if (vm.count("data-device") && in_path != "-" && same_file(in_path, vm["data-device"].as<std::string>()))
        throw UsageError("IN is the --data-device itself");
    // IN first: IMAGE's writable open may replay its journal, which a
    // refused IN should not cause.
    InputFile in(in_path);
    if (struct stat is {}; in_path != "-" && ::stat(in_path.c_str(), &is) == 0 && S_ISDIR(is.st_mode))
        throw Failure(in_path + ": Is a directory");
    Opened o = open_target(vm, image_path, true);
    auto& t = *o.target;
    const uint64_t total = t.size();
    struct stat st {};
    if (in_path != "-" && ::stat(in_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) > total)
        throw Failure(in_path + " holds " + std::to_string(st.st_size) + " bytes; the device provides " +
                      std::to_string(total));
    const uint32_t bs = t.block_size();
    // IN in order into each request's buffer; its last partial block is
    // read back and completed, as the page cache does for a partial block
    // written to a device.
    auto fill = [&](uint64_t pos, uint8_t* slot, std::size_t want) {
        const std::size_t n = in.read(blkcrypt::Bytes(slot, want));
        if (const std::size_t whole = n / bs * bs; whole < n) {
            std::vector<uint8_t> last(bs);
            if (auto r = read_blocks(t, pos + whole, last); !r) throw Failure(named(image_path, r.error().message));
            std::copy(slot + whole, slot + n, last.begin());
            std::copy(last.begin(), last.end(), slot + whole);
            if (in.read(blkcrypt::Bytes(last).first(1)) != 0) throw Failure(in_path + ": short read before its end");
            return blkcrypt::Bytes(slot, whole + bs);  // IN ended: no more after it
        }
        return blkcrypt::Bytes(slot, n);
    };
    auto failed = [&](uint64_t at, std::size_t, blkcrypt::Status s) {
        throw Failure(image_path + ": writing at byte " + std::to_string(at) + ": " + blkcrypt::to_string(s));
    };
    auto dev = ring_device(vm, o);
    const uint64_t done =
        copy_device({.device = *dev, .bytes = total, .write = true, .fill = fill, .failed = failed, .name = image_path,
                     .threads = vm["threads"].as<unsigned>(), .progress = progress_settings(vm)})
            .bytes;
    if (done == total) {
        uint8_t extra = 0;
        if (in.read(blkcrypt::Bytes(&extra, 1)) != 0)
            throw Failure(in_path + " is larger than the device (" + std::to_string(total) + " bytes); the first " +
                          std::to_string(total) + " bytes were written");
    }
    dev.reset();
    if (auto f = t.flush(); !f) throw Failure(named(image_path, f.error().message));
    if (auto c = t.close(); !c) throw Failure(named(image_path, c.error().message));
    return 0;
}

// --- verify -------------------------------------------------------------------

int run_verify(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("integrity verify takes IMAGE");
    if (vm["integrity-recovery-mode"].as<bool>()) throw UsageError("-R: recovery mode checks nothing");
    Opened o = open_target(vm, files[0], false);
    auto& t = *o.target;
    const uint64_t total = t.size();
    const uint32_t bs = t.block_size();
    Progress progress(progress_settings(vm), files[0], total);
    std::vector<uint8_t> buf(std::max<uint64_t>(kChunk, bs));
    std::vector<std::pair<uint64_t, std::string>> bad;  // sector, message
    for (uint64_t pos = 0; pos < total;) {
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(buf.size(), total - pos));
        if (auto r = t.read_checked(pos, blkcrypt::Bytes(buf).first(n)); !r) {
            if (r.status() != blkcrypt::Status::Corrupt) throw Failure(named(files[0], r.error().message));
            // Which blocks: each checked alone.
            for (uint64_t b = 0; b < n; b += bs) {
                auto one = t.read_checked(pos + b, blkcrypt::Bytes(buf).subspan(static_cast<std::size_t>(b), bs));
                if (!one) {
                    if (one.status() != blkcrypt::Status::Corrupt) throw Failure(named(files[0], one.error().message));
                    bad.emplace_back((pos + b) / integrity::kSectorSize, one.error().message);
                }
            }
        }
        pos += n;
        progress.update(pos);
    }
    progress.finish();
    if (bad.empty()) return 0;
    const uint64_t max = vm["max-errors"].as<uint64_t>();
    const std::size_t shown = max == 0 ? bad.size() : static_cast<std::size_t>(std::min<uint64_t>(max, bad.size()));
    for (std::size_t i = 0; i < shown; ++i) std::cerr << "blkcrypt: " << bad[i].second << "\n";
    if (shown < bad.size())
        std::cerr << "blkcrypt: ... and " << bad.size() - shown << " more bad blocks (--max-errors 0 lists all)\n";
    throw Failure("verification failed: " + std::to_string(bad.size()) + " block(s) with a wrong tag");
}

// --- serve --------------------------------------------------------------------

int run_serve(po::variables_map vm, const std::vector<std::string>& files) {
    if (files.empty() || files.size() > 2) throw UsageError("integrity serve takes IMAGE [NAME]");
    if (files.size() == 2) {
        // integritysetup open IMAGE NAME: NAME names the mapping; here the export.
        if (vm.count("export-name") && vm["export-name"].as<std::string>() != files[1])
            throw UsageError("NAME '" + files[1] + "' and --export-name '" + vm["export-name"].as<std::string>() +
                             "' differ");
        vm.erase("export-name");
        vm.insert({"export-name", po::variable_value(boost::any(files[1]), false)});
    }
    const bool read_only = vm["read-only"].as<bool>() || vm["integrity-recovery-mode"].as<bool>();
    block_stop_signals();  // before any thread exists
    Opened o = open_target(vm, files[0], !read_only);
    // Each failed request logged naming its sector, as the kernel's dmesg
    // line names it, before it fails (EIO).
    auto dev = blkcrypt::dm::make_integrity_device(o.target, vm["threads"].as<unsigned>(),
                                                   [](const blkcrypt::Error& e) {
                                                       std::cerr << "blkcrypt: " << e.message << "\n";
                                                   });
    if (!dev) throw Failure(dev.error().message);
    const int rc = serve_device(vm, *dev);
    if (auto c = o.target->close(); !c) throw Failure(named(files[0], c.error().message));
    return rc;
}

// --- dump ---------------------------------------------------------------------

int run_dump(const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("integrity dump needs exactly one IMAGE");
    const std::string& path = files[0];
    auto store = open_container_image(path, false);
    // integritysetup's line, then why (exit 1, as integritysetup).
    const std::string invalid = "Device " + path + " is not a valid INTEGRITY device: ";
    std::array<uint8_t, integrity::kSuperblockBytes> head{};
    if (store->size() < head.size()) throw Failure(invalid + "shorter than its 64-byte superblock");
    if (auto st = store->read(0, head); st != blkcrypt::Status::Ok)
        throw Failure(invalid + "cannot read it (" + blkcrypt::to_string(st) + ")");
    auto sb = integrity::decode_superblock(head);
    if (!sb) {
        if (!integrity::has_magic(head)) throw Failure(invalid + "no dm-integrity superblock (magic \"integrt\")");
        throw Failure(invalid + "incompatible kernel dm-integrity metadata (version " + std::to_string(head[8]) +
                      "; integritysetup 2.6.1 reads 1 to 5)");
    }
    std::cout << integrity::dump_text(*sb, path);
    return 0;
}

}  // namespace

int run_integrity(Args args) {
    CommandLine cl{"blkcrypt integrity format IMAGE [options]\n"
                   "       blkcrypt integrity dump IMAGE\n"
                   "       blkcrypt integrity read IMAGE OUT [options]\n"
                   "       blkcrypt integrity write IN IMAGE [options]\n"
                   "       blkcrypt integrity verify IMAGE [options]\n"
                   "       blkcrypt integrity serve|open IMAGE [NAME] (--socket PATH | --port N) [options]",
                   "dm-integrity devices as integritysetup makes and opens them, without root or\n"
                   "device-mapper. format is integritysetup format, but computes the tags of the\n"
                   "zeroed data instead of writing zeros through the device (the data stays a hole).\n"
                   "read writes what integritysetup open exposes, every block checked; write writes\n"
                   "IN through the target from its first sector; verify names every block whose tag\n"
                   "does not match; serve (open) serves the checked device over NBD. With\n"
                   "--data-device DATA, IMAGE is the metadata device."};
    add_integrity_options(cl.options);
    add_serve_options(cl.options);
    add_progress_options(cl.options);
    add_action_arguments(cl, {{"format", "format IMAGE as integritysetup format does, the tags computed"},
                              {"dump", "print the superblock as integritysetup dump does"},
                              {"read", "write the checked data to OUT, as integritysetup open exposes it"},
                              {"write", "write IN through the target from its first sector, tags computed"},
                              {"verify", "check every block against its tag and name the bad sectors"},
                              {"serve", "serve the checked device over NBD (integritysetup open)"},
                              {"open", "integritysetup's name for serve: NAME is the NBD export"}});
    const std::vector<std::string> opening = {"format", "read", "write", "verify", "serve", "open"};
    only_for(cl, opening, {"integrity", "integrity-key-file", "integrity-key-size", "data-device", "buffer-sectors",
                           "bitmap-sectors-per-bit", "journal-integrity", "journal-integrity-key-file",
                           "journal-integrity-key-size", "journal-crypt", "journal-crypt-key-file",
                           "journal-crypt-key-size", "integrity-no-journal", "integrity-bitmap-mode", "threads",
                           "journal-watermark", "journal-commit-time", "bitmap-flush-time"});
    only_for(cl, {"format"}, {"tag-size", "sector-size", "interleave-sectors", "journal-size", "no-wipe",
                              "integrity-legacy-padding", "integrity-legacy-hmac", "batch-mode"});
    only_for(cl, {"read", "write", "verify", "serve", "open"}, {"integrity-recovery-mode", "allow-discards"});
    only_for(cl, {"verify"}, {"max-errors"});
    only_for(cl, {"format", "read", "write", "verify"}, progress_option_names());
    only_for(cl, {"serve", "open"}, serve_option_names());
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "dump") return run_dump(files);
    if (action == "format") return run_format(*vm, files);
    if (action == "read") return run_read(*vm, files);
    if (action == "write") return run_write(*vm, files);
    if (action == "verify") return run_verify(*vm, files);
    if (action == "serve" || action == "open") return run_serve(*vm, files);
    throw UsageError("unknown action '" + action + "': use format, dump, read, write, verify, serve or open");
}

}  // namespace cli
