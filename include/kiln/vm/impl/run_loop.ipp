// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/vm/virtual_machine.hpp>'s execution: entering a function from C++,
// the run loop over the decoded ops, native calls with and without an instrument, and the
// messages of failures (the bytecode call stack). Included by that header.
#pragma once

#include <kiln/vm/virtual_machine.hpp>

namespace kiln::vm {

/// Calls `f(call_args)` on pointers to the `n` values `arg(i)`: an inline array, or the heap for
/// more than `decoded::inline_args`.
template <class Arg, class F>
inline value virtual_machine::with_pointers(std::size_t n, Arg&& arg, F&& f) {
  const value* inline_ptrs[decoded::inline_args];
  std::vector<const value*> heap;
  const value** p = inline_ptrs;
  if (n > decoded::inline_args) {
    heap.resize(n);
    p = heap.data();
  }
  for (std::size_t i = 0; i < n; ++i) p[i] = &arg(i);
  return f(call_args(p, n));
}

value virtual_machine::call_native_from_cpp(const callee& c, std::span<const value> args) {
  return with_pointers(
      args.size(), [&](std::size_t i) -> const value& { return args[i]; }, c.native);
}

/// Throws "<who> '<name>' takes N arguments, got M" unless `c` takes `n` arguments.
inline void virtual_machine::check_arity(const callee& c, std::string_view who, std::size_t n) {
  if (std::int64_t(n) != c.info->num_args) [[unlikely]]
    arity_error(c, who, n);
}
void virtual_machine::arity_error(const callee& c, std::string_view who, std::size_t n) {
  throw usage_error(std::string(who) + " '" + c.info->name + "' takes " + std::to_string(c.info->num_args) + " arguments, got " +
                    std::to_string(n));
}

/// Calls bytecode or compiled function `c` from C++ with the `n` arguments `arg(i)`.
template <class Arg>
inline value virtual_machine::enter_with_args(const callee& c, std::string_view who, std::size_t n, Arg&& arg) {
  check_arity(c, who, n);
  return enter(c, [&](value* regs) {
    for (std::size_t i = 0; i < n; ++i) std::construct_at(regs + i, arg(i));  // fresh registers are null
  });
}

/// Pushes a frame for `c`, lets `fill` write the arguments, runs to the matching Ret.
template <class Fill>
inline value virtual_machine::enter(const callee& c, Fill&& fill) {
  if (depth_ >= options_.max_reentry_depth) [[unlikely]]
    throw_reentry();
  if (top_ + 1 == frames_end_) [[unlikely]]
    throw_depth();
  ++depth_;
  // Leaving, normally or by an exception: pop what is left of the frames pushed here.
  struct scope {
    virtual_machine& vm;
    frame* const caller;
    ~scope() {
      if (vm.top_ != caller) [[unlikely]]
        vm.pop_frames(caller);  // an exception, or a compiled function's frame
      --vm.depth_;
    }
  } guard{*this, top_};
  value* regs = stack_.push(c.registers);
  frame* f = ++top_;
  *f = frame{regs, nullptr, nullptr, c.registers, c.index, false};
  fill(regs);
  if (c.kind == function_kind::compiled) return c.compiled.fn(c.compiled.state, *this, std::span<value>(regs, c.registers - 1));
  return instrument_ ? run<true>(f, c.entry) : run<false>(f, c.entry);
}

/// Pops frames down to `keep`, releasing their registers.
void virtual_machine::pop_frames(frame* keep) noexcept {
  for (; top_ != keep; --top_) {
    stack_.pop(top_->regs, top_->registers);
    if (top_->instrumented && !instrument_args_.empty()) instrument_args_.pop_back();
  }
}

void virtual_machine::throw_depth() const {
  throw vm_error("the call stack reached " + std::to_string(options_.max_call_depth) +
                 " frames (unbounded recursion?); raise vm_options::max_call_depth if intended");
}
void virtual_machine::throw_reentry() const {
  throw vm_error(std::to_string(options_.max_reentry_depth) +
                 " nested invocations (natives calling back into the VM); raise vm_options::max_reentry_depth if intended");
}

/// The message of a failure at `ip` of the top frame, with the bytecode call stack down to `base`.
inline std::string virtual_machine::trace(const op* ip, const frame* base, const std::string& what) const {
  const auto& f = exec_->functions[top_->callee];
  std::string s = "kiln::vm: in '" + f.name + "' at instruction " + std::to_string(std::int64_t(pc_of(ip)) - f.start_instr);
  if (ip->code <= decoded::op_call_compiled) s.append(" (call '").append(exec_->functions[ip->a].name).append("')");
  return s.append(": ").append(what).append(call_stack(ip, base, false));
}
/// "\n  called from 'f' at instruction 3" for each caller of the top frame down to `base`,
/// starting with the top frame itself (at `ip`) when `with_top`.
inline std::string virtual_machine::call_stack(const op* ip, const frame* base, bool with_top) const {
  std::string s;
  auto line = [&](const frame& f, const op* at) {
    const auto& fn = exec_->functions[f.callee];
    s.append("\n  called from '").append(fn.name).append("' at instruction ");
    s.append(std::to_string(std::int64_t(pc_of(at)) - fn.start_instr));
  };
  if (with_top) line(*top_, ip);
  for (const frame* f = top_; f > base; --f) line(f[-1], f->return_ip - 1);
  return s;
}

void virtual_machine::bad_condition(const value& v) {
  throw value_error("If: the condition register holds " + std::string(name(v.kind())) +
                    ", expected int or bool (use vm.builtin.read_if_cond for tensors)");
}

/// The instrument's after-call report for a bytecode call that has just returned `rv`.
inline void virtual_machine::report_return(const frame& done, const value& rv) {
  const reported_call call = std::move(instrument_args_.back());
  instrument_args_.pop_back();
  std::vector<const value*> ptrs;
  for (auto& a : call.args) ptrs.push_back(&a);
  (*call.to)(function_value(done.callee), exec_->functions[done.callee].name, false, rv, call_args(ptrs.data(), ptrs.size()));
}

/// Calls a native callee with `args` into `out`; instrumented, reports before and after (a
/// skipped call stores null).
template <bool Instrumented>
inline void virtual_machine::call_native(const op& o, call_args args, value& out) {
  if constexpr (!Instrumented) {
    out.assign_raw(o.to.native.fn(o.to.native.state, args));
  } else {
    const value& func = function_value(o.a);
    const std::string& symbol = exec_->functions[o.a].name;
    const native_function& n = callees_[o.a].native;  // the op may hold the direct entry
    instrument_fn* const to = instrument_.get();
    if (!to) [[unlikely]] {  // removed while running
      out.assign_raw(n.fn(n.state, args));
      return;
    }
    if ((*to)(func, symbol, true, value(), args) == instrument_action::skip_run) {
      out.reset();
      return;
    }
    // `out` may be an argument register: the after-report gets the arguments as they were.
    value rv = value::from_raw(n.fn(n.state, args));
    (*to)(func, symbol, false, rv, args);
    out = std::move(rv);
  }
}
/// A native call through `call_args`, with at most `decoded::inline_args` arguments.
template <bool Instrumented>
inline void virtual_machine::call_native_gathered(const op& o, value* regs) {
  const value* argv[decoded::inline_args];
  for (std::uint32_t i = 0; i < o.nargs; ++i) argv[i] = &resolve_operand(o.args[i], regs);
  call_native<Instrumented>(o, call_args(argv, o.nargs), decoded::slot(regs, o.dst));
}
/// A native call with more than `decoded::inline_args` arguments (kept out of the run loop's frame).
template <bool Instrumented>
void virtual_machine::call_native_long(const op& o, value* regs) {
  std::vector<const value*> argv(o.nargs);
  for (std::uint32_t i = 0; i < o.nargs; ++i) argv[i] = &resolve_operand(o.args[i], regs);
  call_native<Instrumented>(o, call_args(argv.data(), o.nargs), decoded::slot(regs, o.dst));
}

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
/// The run loop: executes from `entry` in frame `base` (the top frame) until the Ret that pops it.
template <bool Instrumented>
inline value virtual_machine::run(frame* const base, const op* entry) {
#if KILN_VM_COMPUTED_GOTO
  static void* const dispatch_table[] = {
#define KILN_VM_OP_LABEL(id) &&handle_##id,
      KILN_VM_INTERNAL_OPS(KILN_VM_OP_LABEL)
#undef KILN_VM_OP_LABEL
  };
  if constexpr (!Instrumented) {
    if (base == nullptr) [[unlikely]] {  // the constructor's call: thread the ops
      for (op& o : ops_) o.handler = dispatch_table[o.code];
      return value();
    }
  }
  // The plain loop jumps straight to each op's handler; the instrumented one looks it up.
#define KILN_VM_DISPATCH() goto*(Instrumented ? dispatch_table[ip->code] : ip->handler);
#define KILN_VM_HANDLER(id) handle_##id:
#define KILN_VM_NEXT() KILN_VM_DISPATCH()
#else
#define KILN_VM_DISPATCH() switch (ip->code)
#define KILN_VM_HANDLER(id) case decoded::op_##id:
#define KILN_VM_NEXT() continue
#endif
  const op* ip = entry;
  value* regs = base->regs;

  try {
#if !KILN_VM_COMPUTED_GOTO
    for (;;)
#endif
    {
      // Each handler's locals live in its own block, closed before the next dispatch (an
      // indirect goto may not leave the scope of an object with a destructor).
      KILN_VM_DISPATCH() {
        KILN_VM_HANDLER(call_native_direct) {
          if constexpr (Instrumented) {  // the instrument wants call_args: the generic path
            if (ip->nargs > decoded::inline_args) call_native_long<true>(*ip, regs);
            else call_native_gathered<true>(*ip, regs);
          } else {
            decoded::slot(regs, ip->dst).assign_raw(ip->to.native.direct(ip->to.native.state, regs, ip->args));
          }
          ++ip;
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(call_native) {
          call_native_gathered<Instrumented>(*ip, regs);
          ++ip;
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(call_native_long) {
          call_native_long<Instrumented>(*ip, regs);
          ++ip;
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(call_bytecode) {
          {
            const op& o = *ip;
            if (top_ + 1 == frames_end_) [[unlikely]]
              throw_depth();
            bool instrumented = false;
            if constexpr (Instrumented) {
              if (!instrument_bytecode_call(o, regs, instrumented)) {
                decoded::slot(regs, o.dst).reset();
                ++ip;
                KILN_VM_NEXT();
              }
            }
            value* callee_regs = stack_.push(o.to.code.registers);
            // Registers above the stack's top are null, so the arguments are constructed in place.
            for (std::uint32_t i = 0; i < o.nargs; ++i) std::construct_at(callee_regs + i, resolve_operand(o.args[i], regs));
            *++top_ = frame{callee_regs, ip + 1, &decoded::slot(regs, o.dst), o.to.code.registers, o.a, instrumented};
            regs = callee_regs;
            ip = o.to.code.entry;
          }
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(call_compiled) {
          {
            const op& o = *ip;
            const callee& c = callees_[o.a];
            value rv = with_pointers(
                o.nargs, [&](std::size_t i) -> const value& { return resolve_operand(o.args[i], regs); },
                [&](call_args args) {
                  const auto enter_callee = [&] {
                    return enter(c, [&](value* dst) {
                      for (std::size_t i = 0; i < args.size(); ++i) dst[i] = args[i];
                    });
                  };
                  if constexpr (Instrumented) {
                    instrument_fn* const to = instrument_.get();
                    if (!to) [[unlikely]]  // removed while running
                      return enter_callee();
                    if ((*to)(function_value(o.a), c.info->name, true, value(), args) == instrument_action::skip_run)
                      return value();
                    value r = enter_callee();
                    (*to)(function_value(o.a), c.info->name, false, r, args);
                    return r;
                  } else {
                    return enter_callee();
                  }
                });
            decoded::slot(regs, o.dst) = std::move(rv);
            ++ip;
          }
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(ret) {
          {
            frame* const done = top_;
            value& result = decoded::slot(regs, ip->a);
            if (done == base) {
              value rv = std::move(result);
              stack_.pop(done->regs, done->registers);
              top_ = done - 1;
              return rv;
            }
            if constexpr (Instrumented)
              if (done->instrumented) report_return(*done, result);
            done->return_dst->assign_raw(std::move(result).into_raw());
            stack_.pop(done->regs, done->registers);
            ip = done->return_ip;
            top_ = done - 1;
            regs = done[-1].regs;
          }
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(goto_) {
          ip = ip->to.code.entry;
          KILN_VM_NEXT();
        }
        KILN_VM_HANDLER(if_) {
          {
            const value& cond = decoded::slot(regs, ip->a);
            if (!cond.is_int() && !cond.is_bool()) [[unlikely]]
              bad_condition(cond);
            // An int's or a bool's payload is nonzero exactly when the condition holds.
            const bool taken = cond.is_int() ? cond.raw_bits() != 0 : cond.as_bool();
            ip = taken ? ip + 1 : ip->to.code.entry;
          }
          KILN_VM_NEXT();
        }
      }
    }
  } catch (const vm_error& e) {
    // The exception being handled stays nested inside the new one (std::rethrow_if_nested), so
    // that what a native function or an instrument threw can be recovered: a binding to another
    // language raises its own exception again.
    if (!e.located()) std::throw_with_nested(vm_error(trace(ip, base, e.what()), true));
    // From a nested invocation: add this loop's part of the call stack.
    std::throw_with_nested(vm_error(std::string(e.what()) + call_stack(ip, base, true), true));
  } catch (const std::exception& e) {
    std::throw_with_nested(vm_error(trace(ip, base, e.what()), true));
  }
#if KILN_VM_COMPUTED_GOTO
  __builtin_unreachable();
#endif
#undef KILN_VM_DISPATCH
#undef KILN_VM_HANDLER
#undef KILN_VM_NEXT
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/// Instrumented bytecode call: reports it and, unless skipped, saves its arguments for the
/// after-report. False when the instrument skips the call.
inline bool virtual_machine::instrument_bytecode_call(const op& o, const value* regs, bool& instrumented) {
  instrument_fn* const to = instrument_.get();
  if (!to) [[unlikely]]  // removed while running: the call runs unreported
    return true;
  std::vector<const value*> argv(o.nargs);
  for (std::uint32_t i = 0; i < o.nargs; ++i) argv[i] = &resolve_operand(o.args[i], regs);
  const call_args args(argv.data(), o.nargs);
  if ((*to)(function_value(o.a), exec_->functions[o.a].name, true, value(), args) == instrument_action::skip_run) return false;
  auto& saved = instrument_args_.emplace_back();
  saved.to = to;
  for (std::uint32_t i = 0; i < o.nargs; ++i) saved.args.push_back(args[i]);
  instrumented = true;
  return true;
}

}  // namespace kiln::vm
