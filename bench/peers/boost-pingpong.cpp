// SPDX-License-Identifier: LGPL-2.1-or-later
//
// boost-pingpong - Boost's figures for bench/pipe-pingpong's one-worker
// round trip, measured beside it by bench/vs-boost.
//
//   --mode channel  two Boost.Fiber fibers on one thread (the default
//                   round_robin scheduler) bounce a 4-byte token through
//                   two boost::fibers::unbuffered_channel<uint32_t>: ping
//                   pushes it, pong pops it and pushes it back plus one.
//                   A round trip is two rendezvous, two blocking waits and
//                   two wakeups, as pipe-pingpong's.
//   --mode jump     the bare context switch under Boost.Fiber (and
//                   Boost.Context's fiber and callcc): the main context
//                   and one made with make_fcontext() hand the token to
//                   each other with jump_fcontext(), which saves and
//                   restores what the ABI has a callee keep (as libfiber's
//                   fb_ctx_switch does) and passes a pointer-sized value.
//                   A round trip is two jumps; nothing is queued, locked
//                   or woken.
//
// As pipe-pingpong, each mode first runs 1% of --loops untimed, then times
// --loops round trips with CLOCK_MONOTONIC (std::chrono::steady_clock) and
// checks every token.  Prints one JSON object:
//   {"mode": "channel", "loops": N, "ns_per_roundtrip": X, "boost": "1_74"}
#include <boost/context/detail/fcontext.hpp>
#include <boost/fiber/all.hpp>
#include <boost/version.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace
{

namespace ctx = boost::context::detail;
namespace fibers = boost::fibers;

[[noreturn]] void die(const char *what)
{
	std::fprintf(stderr, "boost-pingpong: %s\n", what);
	std::exit(1);
}

std::uint64_t now_ns()
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(
		       std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

// Boost.Fiber: ping and pong fibers, two unbuffered channels.
std::uint64_t run_channel(unsigned long loops)
{
	fibers::unbuffered_channel<std::uint32_t> to_pong, to_ping;
	unsigned long warmup = loops / 100 ? loops / 100 : 1;
	std::uint64_t elapsed = 0;

	fibers::fiber pong([&] {
		std::uint32_t v;

		while (to_pong.pop(v) == fibers::channel_op_status::success)
			if (to_ping.push(v + 1) !=
			    fibers::channel_op_status::success)
				die("channel: push to ping failed");
	});
	fibers::fiber ping([&] {
		std::uint32_t token = 0, reply;
		std::uint64_t t0 = 0;

		for (unsigned long i = 0; i < warmup + loops; i++) {
			if (i == warmup)
				t0 = now_ns();
			if (to_pong.push(token) !=
				    fibers::channel_op_status::success ||
			    to_ping.pop(reply) !=
				    fibers::channel_op_status::success)
				die("channel: a channel closed");
			if (reply != token + 1)
				die("channel: wrong token");
			token++;
		}
		elapsed = now_ns() - t0;
		to_pong.close();
	});
	ping.join();
	pong.join();
	return elapsed;
}

// Raw Boost.Context: the pong context returns each token plus one.
void pong_context(ctx::transfer_t t)
{
	for (;;) {
		auto v = static_cast<std::uint32_t>(
			reinterpret_cast<std::uintptr_t>(t.data));

		t = ctx::jump_fcontext(
			t.fctx,
			reinterpret_cast<void *>(std::uintptr_t{ v + 1 }));
	}
}

std::uint64_t run_jump(unsigned long loops)
{
	const std::size_t size = 64 * 1024;
	unsigned long warmup = loops / 100 ? loops / 100 : 1;
	void *stack = std::malloc(size);
	std::uint64_t t0 = 0;

	if (!stack)
		die("out of memory for a stack");
	ctx::fcontext_t pong = ctx::make_fcontext(
		static_cast<char *>(stack) + size, size, pong_context);
	for (unsigned long i = 0; i < warmup + loops; i++) {
		auto token = static_cast<std::uint32_t>(i);

		if (i == warmup)
			t0 = now_ns();
		ctx::transfer_t t = ctx::jump_fcontext(
			pong,
			reinterpret_cast<void *>(std::uintptr_t{ token }));
		pong = t.fctx;
		if (reinterpret_cast<std::uintptr_t>(t.data) != token + 1u)
			die("jump: wrong token");
	}
	std::uint64_t elapsed = now_ns() - t0;
	// The pong context never finishes: its stack is simply dropped.
	std::free(stack);
	return elapsed;
}

[[noreturn]] void usage(int status)
{
	std::fprintf(status ? stderr : stdout,
		     "usage: boost-pingpong [--mode channel|jump] "
		     "[--loops N]\n");
	std::exit(status);
}

} // namespace

int main(int argc, char **argv)
{
	std::string mode = "channel";
	unsigned long loops = 3000000;

	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];

		if (a == "-h" || a == "--help")
			usage(0);
		if (i + 1 >= argc)
			usage(2);
		if (a == "--mode") {
			mode = argv[++i];
		} else if (a == "--loops" || a == "-l") {
			char *end;

			loops = std::strtoul(argv[++i], &end, 10);
			if (*end || !loops)
				usage(2);
		} else {
			usage(2);
		}
	}
	std::uint64_t ns;
	if (mode == "channel")
		ns = run_channel(loops);
	else if (mode == "jump")
		ns = run_jump(loops);
	else
		usage(2);
	std::printf("{\"mode\": \"%s\", \"loops\": %lu, "
		    "\"ns_per_roundtrip\": %.3f, \"boost\": \"%s\"}\n",
		    mode.c_str(), loops, static_cast<double>(ns) / loops,
		    BOOST_LIB_VERSION);
	return 0;
}
