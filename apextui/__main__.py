try:  # Ctrl-C while the package itself imports: the documented 130, not a traceback
    from .cli import main
except KeyboardInterrupt:
    raise SystemExit(130) from None

if __name__ == "__main__":  # not when multiprocessing re-imports it in a worker process
    raise SystemExit(main())
