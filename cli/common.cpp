#include "common.hpp"
#include "oneshot.hpp"
#include "number_option.hpp"
#include "output_file.hpp"

#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/hex.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {

namespace {
std::optional<CommandLine>* describe_sink = nullptr;

// "blkcrypt verity" for the usage "blkcrypt verity format ...\n  blkcrypt
// verity verify ...": the lower-case words every usage line starts with.
std::string help_command(const std::string& usage) {
    std::vector<std::string> common;
    bool first = true;
    std::size_t start = 0;
    while (start <= usage.size()) {
        std::size_t end = usage.find('\n', start);
        if (end == std::string::npos) end = usage.size();
        std::vector<std::string> words;
        std::size_t i = usage.find_first_not_of(' ', start);
        while (i < end) {
            std::size_t j = std::min(usage.find(' ', i), end);
            const std::string w = usage.substr(i, j - i);
            if (w.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) break;
            words.push_back(w);
            i = usage.find_first_not_of(' ', j);
        }
        if (!words.empty() && words[0] == "blkcrypt") {  // not a continuation line
            if (first) {
                common = words;
                first = false;
            } else {
                std::size_t k = 0;
                while (k < common.size() && k < words.size() && common[k] == words[k]) ++k;
                common.resize(k);
            }
        }
        start = end + 1;
    }
    std::string out;
    for (const auto& w : common) out += (out.empty() ? "" : " ") + w;
    return out.empty() ? "blkcrypt" : out;
}

}  // namespace

std::optional<CommandLine>* set_describe_sink(std::optional<CommandLine>* sink) noexcept {
    return std::exchange(describe_sink, sink);
}

std::optional<po::variables_map> parse_command_line(CommandLine& cl, Args args) {
    // -h is --hash where a command has one (crypt, as in cryptsetup).
    const bool h_taken = cl.options.find_nothrow("-h", false, false, false) != nullptr;
    cl.options.add_options()(h_taken ? "help" : "help,h", "show this help and exit");
    if (describe_sink) {
        describe_sink->emplace(cl);
        return std::nullopt;
    }
    po::options_description all;
    all.add(cl.options).add(cl.hidden);
    // No prefix guessing: "--enc" should not silently mean "--encrypt".
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    std::vector<std::string> words(args.begin(), args.end());
    for (auto& w : words) {
        if (w == "--") break;
        const auto eq = w.find('=');
        if (auto a = cl.aliases.find(w.substr(0, eq)); a != cl.aliases.end())
            w = a->second + (eq == std::string::npos ? "" : w.substr(eq));
    }
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(words)
                      .options(all)
                      .positional(cl.positional)
                      .style(style)
                      .run(),
                  vm);
        if (vm.count("help")) {
            std::cout << "Usage: " << cl.usage << "\n" << cl.summary << "\n\n" << cl.options;
            return std::nullopt;
        }
        po::notify(vm);  // after the --help check, so --help needs no required options
    } catch (const po::error& e) {
        // "encrypt, decrypt or table", for a missing ACTION.
        std::string actions;
        for (std::size_t i = 0; i < cl.actions.size(); ++i)
            actions += (i == 0 ? "" : i + 1 == cl.actions.size() ? " or " : ", ") + cl.actions[i].name;
        throw UsageError(option_error_message(e, help_command(cl.usage), actions));
    }
    if (vm.count("action")) check_action_options(cl, vm, vm["action"].as<std::string>());
    // cryptsetup --test-args: the command line is valid; do nothing more.
    if (vm.count("test-args") && vm["test-args"].as<bool>()) return std::nullopt;
    // What prints on stdout, so that no output "-" shares it (Output refuses).
    std::string report;
    for (const char* o : {"progress-json", "json"}) {
        if (!vm.count(o) || vm[o].defaulted()) continue;
        const auto& v = vm[o].value();
        if (v.type() != typeid(bool) || boost::any_cast<bool>(v)) report = std::string("--") + o;
    }
    set_stdout_report(report);
    return vm;
}

bool given(const po::variables_map& vm, const char* name) {
    return vm.count(name) && !vm[name].defaulted();
}

void refuse_given(const po::variables_map& vm, const std::vector<std::string>& options, const std::string& why) {
    for (const auto& o : options)
        if (given(vm, o.c_str())) throw UsageError("--" + o + ": " + why);
}

void only_for(CommandLine& cl, const std::vector<std::string>& actions,
              const std::vector<std::string>& options) {
    for (const auto& o : options) {
        auto& scope = cl.scopes[o];
        scope.insert(scope.end(), actions.begin(), actions.end());
    }
}

void check_action_options(const CommandLine& cl, const po::variables_map& vm, const std::string& action) {
    for (const auto& [option, actions] : cl.scopes) {
        if (!given(vm, option.c_str()) || std::find(actions.begin(), actions.end(), action) != actions.end())
            continue;
        std::string list;
        for (const auto& a : actions) list += (list.empty() ? "" : ", ") + a;
        // "blkcrypt crypt ..." -> "crypt table"
        const std::string cmd = cl.usage.substr(0, cl.usage.find(' ', 9)).substr(cl.usage.rfind("blkcrypt ", 0) == 0 ? 9 : 0);
        throw UsageError("--" + option + " does not apply to " + cmd + " " + action + " (only to " + list + ")");
    }
}

void add_action_arguments(CommandLine& cl, std::vector<Action> actions) {
    cl.actions = std::move(actions);
    cl.hidden.add_options()
        ("action", po::value<std::string>()->required())
        ("files", po::value<std::vector<std::string>>());
    cl.positional.add("action", 1).add("files", -1);
}

ActionArgs action_arguments(const po::variables_map& vm) {
    ActionArgs a{vm["action"].as<std::string>(), {}};
    if (vm.count("files")) a.files = vm["files"].as<std::vector<std::string>>();
    return a;
}

bool encrypt_requested(const po::variables_map& vm) {
    const bool enc = vm["encrypt"].as<bool>();
    if (enc == vm["decrypt"].as<bool>())
        throw UsageError("give exactly one of --encrypt and --decrypt");
    return enc;
}

std::string errno_message(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

void write_all(int fd, blkcrypt::ConstBytes data, const std::string& name) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Failure(errno_message(name));
        }
        data = data.subspan(static_cast<std::size_t>(n));
    }
}

blkcrypt::SecureBuffer decode_secret_hex(std::string_view hex, std::string_view what) {
    auto r = blkcrypt::hex_decode_secret(hex);
    if (!r) throw UsageError(std::string(what) + ": " + r.error().message);
    return std::move(r).value();
}

std::vector<uint8_t> decode_hex(std::string_view hex, std::string_view what) {
    auto r = blkcrypt::hex_decode(hex);
    if (!r) throw UsageError(std::string(what) + ": " + r.error().message);
    return std::move(r).value();
}

std::string encode_hex(blkcrypt::ConstBytes bytes) { return blkcrypt::hex_encode(bytes); }

std::vector<uint8_t> iv_option(const po::variables_map& vm, std::size_t ivsize,
                               const std::string& driver) {
    if (ivsize == 0) {
        if (vm.count("iv")) throw UsageError(driver + " takes no IV; drop --iv");
        return {};
    }
    if (!vm.count("iv"))
        throw UsageError(driver + " needs --iv of " + std::to_string(ivsize) + " bytes");
    auto iv = decode_hex(vm["iv"].as<std::string>(), "--iv");
    if (iv.size() != ivsize)
        throw UsageError("--iv must be " + std::to_string(ivsize) + " bytes for " + driver +
                         ", got " + std::to_string(iv.size()));
    return iv;
}

std::string key_rejected(const blkcrypt::AlgInfo& info, std::size_t keylen) {
    std::string msg = "key of " + std::to_string(keylen) + " bytes rejected by " + info.driver;
    if (info.max_keysize)
        msg += " (min " + std::to_string(info.min_keysize) + ", max " +
               std::to_string(info.max_keysize) + ")";
    return msg;
}

void add_driver_option(po::options_description& opts) {
    opts.add_options()("driver", po::value<std::string>()->value_name("NAME"),
                       "use this driver of --alg, e.g. xts(aes-cryptopp) or xts-aes-openssl");
}

void add_oneshot_options(po::options_description& opts, const char* alg_help) {
    opts.add_options()
        ("alg", po::value<std::string>()->required()->value_name("NAME"), alg_help)
        ("key", po::value<std::string>()->required()->value_name("HEX"), "key in hex")
        ("iv", po::value<std::string>()->value_name("HEX"), "IV in hex, exactly the algorithm's ivsize")
        ("encrypt,e", po::bool_switch(), "encrypt")
        ("decrypt,d", po::bool_switch(), "decrypt")
        ("in,i", po::value<std::string>()->default_value("-")->value_name("FILE"), "input file, '-' for stdin")
        ("out,o", po::value<std::string>()->default_value("-")->value_name("FILE"), "output file, '-' for stdout");
    add_driver_option(opts);
}

std::string name_to_alloc(blkcrypt::Registry& reg, const po::variables_map& vm) {
    const auto& alg = vm["alg"].as<std::string>();
    if (!vm.count("driver")) return alg;
    return checked_driver(reg, alg, vm["driver"].as<std::string>());
}

std::string checked_driver(blkcrypt::Registry& reg, const std::string& alg, const std::string& driver) {
    auto canon = blkcrypt::AlgName::parse(alg);
    if (!canon) throw UsageError(canon.error().message);
    auto found = reg.describe(driver);  // instantiates template drivers such as cbc(aes-cryptopp)
    if (!found) throw_alloc_error(found.error());
    const blkcrypt::AlgInfo& info = *found;
    if (info.driver != driver)
        throw UsageError("'" + driver + "' is not a driver name (it names " + info.driver + ")");
    if (info.name != canon->str())
        throw UsageError("driver '" + driver + "' implements " + info.name + ", not " + canon->str());
    return driver;
}

void throw_error(const blkcrypt::Error& e) {
    if (e.status == blkcrypt::Status::NoKey) throw StatusFailure(e.message, kExitNoKey);
    throw Failure(e.message);
}

void throw_alloc_error(const blkcrypt::Error& err) {
    if (err.status == blkcrypt::Status::SelftestFailed) throw Failure(err.message);
    throw UsageError(err.message);
}

InputFile::InputFile(const std::string& path)
    : fd_(0), owned_(path != "-"), name_(owned_ ? path : "stdin") {
    if (owned_) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) throw Failure(errno_message(path));
    }
}

InputFile::~InputFile() {
    if (owned_) ::close(fd_);
}

std::size_t InputFile::read(blkcrypt::Bytes buf) {
    std::size_t got = 0;
    while (got < buf.size()) {
        const ssize_t n = ::read(fd_, buf.data() + got, buf.size() - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Failure(errno_message(name_));
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    return got;
}

std::vector<uint8_t> read_all(const std::string& path, std::size_t limit) {
    InputFile in(path);
    constexpr std::size_t kChunk = 1 << 20;
    std::vector<uint8_t> data;
    for (;;) {
        const std::size_t old = data.size();
        data.resize(old + kChunk);
        const std::size_t n = in.read(blkcrypt::Bytes(data).subspan(old));
        data.resize(old + n);
        if (data.size() > limit)
            throw UsageError(path + ": more than the maximum of " + std::to_string(limit) + " bytes");
        if (n < kChunk) return data;
    }
}

std::string lowercase_hash_name(std::string name) {
    for (char& c : name)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return name;
}

}  // namespace cli
