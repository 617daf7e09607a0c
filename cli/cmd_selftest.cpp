// blkcrypt selftest: re-runs the full known-answer tests of the named
// algorithms (every registered one when none are named).
#include "commands.hpp"
#include "json.hpp"

#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace cli {

int run_selftest(Args args) {
    CommandLine cl{"blkcrypt selftest [NAME...]",
                   "Run the full self-tests of the named algorithms (generic or driver names;\n"
                   "template instances such as cbc(aes) are built first), or of every\n"
                   "registered algorithm. Exits 1 if any test fails or a name is unknown."};
    cl.options.add_options()("json", po::bool_switch(), "print one JSON object per line (docs/json.md)");
    cl.hidden.add_options()("name", po::value<std::vector<std::string>>(), "algorithm names");
    cl.positional.add("name", -1);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto requested =
        vm->count("name") ? (*vm)["name"].as<std::vector<std::string>>() : std::vector<std::string>{};

    blkcrypt::Registry& reg = registry();
    const bool json = (*vm)["json"].as<bool>();
    // One line per result: the text line, or {"result", "name", "driver", "message"}.
    auto print = [json](const char* result, const std::string& name, const std::string& driver,
                        const std::string& message, const std::string& text) {
        if (!json) {
            std::cout << text << '\n';
            return;
        }
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("result"), w.string(result);
        w.key("name"), w.string(name);
        if (!driver.empty()) w.key("driver"), w.string(driver);
        w.key("message"), w.string(message);
        w.end_object();
    };

    // Look each name up first so that template instances get built; an
    // instance that failed while being built is still tested (and reported) below.
    std::vector<std::string> names, missing;
    for (const auto& name : requested) {
        names.push_back(name);
        if (auto alg = reg.lookup_any(name); !alg) {
            print("fail", name, "", alg.error().message, "FAIL  " + name + ": " + alg.error().message);
            missing.push_back(name);
        }
    }

    int passed = 0, failed = 0, untested = 0;
    const auto results = reg.run_selftests(names);
    for (const auto& st : results) {
        const std::string who = st.info.driver + " (" + st.info.name + ")";
        switch (st.selftest) {
        case blkcrypt::SelftestState::Passed:
            ++passed;
            print("pass", st.info.name, st.info.driver, st.selftest_message,
                  "PASS  " + who + ": " + st.selftest_message);
            break;
        case blkcrypt::SelftestState::Failed:
            ++failed;
            print("fail", st.info.name, st.info.driver, st.selftest_message,
                  "FAIL  " + who + ": " + st.selftest_message);
            break;
        default:
            ++untested;
            print("skip", st.info.name, st.info.driver, st.selftest_message,
                  "SKIP  " + who + ": untested" +
                      (st.selftest_message.empty() ? "" : " (" + st.selftest_message + ")"));
        }
    }
    // A name counts as a failure unless the run above already reported it.
    for (const auto& name : missing) {
        const bool reported = std::any_of(results.begin(), results.end(), [&](const auto& st) {
            return st.info.name == name || st.info.driver == name;
        });
        if (!reported) ++failed;
    }
    if (json) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("passed"), w.number(passed);
        w.key("failed"), w.number(failed);
        w.key("untested"), w.number(untested);
        w.end_object();
    } else {
        std::cout << passed << " passed, " << failed << " failed, " << untested << " untested\n";
    }
    return failed || !missing.empty() ? 1 : 0;
}

}  // namespace cli
