// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CLI_FLAGS_HPP_INCLUDED
#define FLOTILLA_CLI_FLAGS_HPP_INCLUDED
// A small command-line parser for flotilla's programs: `--name value` or `--name=value`, with
// typed values, defaults, an environment-variable fallback per flag, lower bounds, and --help.
// Every bad input (unknown flag, missing value, unparsable, non-finite or out-of-range number, a
// value below the flag's bound) raises ConfigError naming the flag and the text it was given.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <variant>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla::cli {

namespace detail {

template <class T>
T parse_value(std::string_view flag, std::string_view text) {
  auto fail = [&](const std::string& why) {
    return ConfigError("--" + std::string(flag) + ": '" + std::string(text) + "' " + why);
  };
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(text);
  } else if constexpr (std::is_same_v<T, std::filesystem::path>) {
    if (text.empty()) throw fail("is not a path");
    return std::filesystem::path(std::string(text));
  } else if constexpr (std::is_same_v<T, bool>) {
    if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
    if (text == "0" || text == "false" || text == "no" || text == "off") return false;
    throw fail("is not a boolean (use true/false, yes/no, on/off or 1/0)");
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_unsigned_v<T>) {
      if (!text.empty() && text.front() == '-') throw fail("must not be negative");
    }
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) throw fail("is out of range");
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) throw fail("is not an integer");
    return v;
  } else {
    static_assert(std::is_floating_point_v<T>, "flotilla::cli: unsupported flag type");
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) throw fail("is out of range");
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) throw fail("is not a number");
    if (!std::isfinite(v)) throw fail("is not a finite number");
    return v;
  }
}

template <class T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.empty() ? "\"\"" : v;
  } else if constexpr (std::is_same_v<T, std::filesystem::path>) {
    return v.empty() ? "\"\"" : v.string();
  } else {
    std::ostringstream s;
    s << v;
    return s.str();
  }
}

}  // namespace detail

class Flags {
 public:
  Flags(std::string program, std::string description)
      : program_(std::move(program)), description_(std::move(description)) {}

  /// Declares --name with a default; `env`, when given, names an environment variable that
  /// supplies the value when the flag is absent. The returned reference holds the value after
  /// parse(), and stays valid as long as this object.
  template <class T>
  T& add(std::string name, T default_value, std::string help, std::string env = {}) {
    auto holder = std::make_unique<Holder<T>>();
    holder->value = std::move(default_value);
    holder->name = std::move(name);
    holder->help = std::move(help);
    holder->env = std::move(env);
    holder->default_text = detail::show(holder->value);
    T& ref = holder->value;
    flags_.push_back(std::move(holder));
    return ref;
  }

  /// Refuses values of the numeric flag --name below `least`.
  Flags& at_least(std::string_view name, double least) { return bound(name, least, false); }
  /// Refuses values of the numeric flag --name at or below `floor`.
  Flags& above(std::string_view name, double floor) { return bound(name, floor, true); }

  /// Parses argv. Returns false when --help was asked for (the help text has been written to
  /// `out`); the caller should then exit successfully.
  bool parse(int argc, const char* const* argv, std::ostream& out) {
    for (auto& f : flags_) {
      if (f->env.empty()) continue;
      if (const char* v = std::getenv(f->env.c_str())) {
        try {
          f->set(v);
        } catch (const ConfigError& e) {
          throw ConfigError(std::string(e.what()) + " (from environment variable " + f->env + ")");
        }
      }
    }
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        out << help();
        return false;
      }
      if (arg.substr(0, 2) != "--")
        throw ConfigError(program_ + ": unexpected argument '" + std::string(arg) + "' (flags look like --name value; see --help)");
      arg.remove_prefix(2);
      std::string_view value;
      bool has_value = false;
      if (const auto eq = arg.find('='); eq != std::string_view::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_value = true;
      }
      FlagBase* f = find(arg);
      if (!f) throw ConfigError(program_ + ": unknown flag --" + std::string(arg) + " (see --help)");
      if (!has_value) {
        if (f->is_bool() && (i + 1 >= argc || std::string_view(argv[i + 1]).substr(0, 2) == "--")) {
          value = "true";
        } else if (i + 1 < argc) {
          value = argv[++i];
        } else {
          throw ConfigError(program_ + ": --" + std::string(arg) + " needs a value");
        }
      }
      f->set(value);
    }
    return true;
  }

  std::string help() const {
    std::ostringstream s;
    s << program_ << ": " << description_ << "\n\nflags:\n";
    for (const auto& f : flags_) {
      s << "  --" << f->name << " (default " << f->default_text;
      if (f->minimum) s << "; " << (f->minimum_exclusive ? "> " : ">= ") << detail::show(*f->minimum);
      s << ")";
      if (!f->env.empty()) s << " [env " << f->env << "]";
      s << "\n      " << f->help << "\n";
    }
    return s.str();
  }

 private:
  struct FlagBase {
    std::string name, help, env, default_text;
    std::optional<double> minimum;
    bool minimum_exclusive = false;
    virtual ~FlagBase() = default;
    virtual void set(std::string_view text) = 0;
    virtual bool is_bool() const = 0;
  };
  template <class T>
  struct Holder final : FlagBase {
    T value{};
    void set(std::string_view text) override {
      value = detail::parse_value<T>(name, text);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        if (minimum) {
          const auto v = static_cast<double>(value);
          if (minimum_exclusive ? !(v > *minimum) : !(v >= *minimum))
            throw ConfigError("--" + name + ": '" + std::string(text) + "' must be " +
                              (minimum_exclusive ? "above " : "at least ") + detail::show(*minimum));
        }
      }
    }
    bool is_bool() const override { return std::is_same_v<T, bool>; }
  };

  Flags& bound(std::string_view name, double minimum, bool exclusive) {
    FlagBase* f = find(name);
    if (!f) throw ConfigError(program_ + ": no flag --" + std::string(name) + " to bound");
    f->minimum = minimum;
    f->minimum_exclusive = exclusive;
    return *this;
  }

  FlagBase* find(std::string_view name) {
    for (auto& f : flags_)
      if (f->name == name) return f.get();
    return nullptr;
  }

  std::string program_, description_;
  std::vector<std::unique_ptr<FlagBase>> flags_;
};

}  // namespace flotilla::cli
#endif  // FLOTILLA_CLI_FLAGS_HPP_INCLUDED
