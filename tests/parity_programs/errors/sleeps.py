"""A program that never finishes: the harness must stop it at its time limit."""
import time

time.sleep(600)
