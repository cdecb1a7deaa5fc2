#!/usr/bin/env python3
"""Run an os-ken application (a controller nobody here wrote) listening
for OpenFlow switches at HOST:PORT, until killed.

os-ken 2.x and later ship no `osken-manager` command; this does what it
did: configure the listening address and run the application with the
OpenFlow handler it needs. Each packet_in the application logs goes to
stderr.

    osken_run.py HOST PORT APP.py
"""
import logging
import sys

from os_ken import cfg
from os_ken.base import app_manager


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: osken_run.py HOST PORT APP.py")
    host, port, app = sys.argv[1:]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(name)s: %(message)s")
    cfg.CONF(args=["--ofp-listen-host", host, "--ofp-tcp-listen-port", port],
             project="os_ken")
    app_manager.AppManager.run_apps([app])


if __name__ == "__main__":
    main()
